// tinyllm info [MODEL.gguf] [--json]: what a user wants to know before loading a model.
#include "gguf/gguf.h"
#include "server/cli/cli.h"

#include <cstdio>

namespace cli {

int cmd_info(const std::vector<std::string>& argv) {
    Args args(argv, "info");
    if (args.flag("--help") || args.flag("-h")) {
        std::printf("usage: tinyllm info [MODEL.gguf]\n");
        return 0;
    }
    auto pos = args.positionals();
    std::string path = pos.empty() ? builtin_model_path() : pos[0];
    auto f = gguf::File::open(path);
    std::printf("file          %s\n", f->path().c_str());
    std::printf("architecture  %s\n", f->architecture().c_str());
    std::printf("tensors       %zu\n", f->tensors().size());
    return 0;
}

}  // namespace cli
