// tinyllm info [MODEL.gguf] [--json]: what a user wants to know before loading a model.
#include "devices/present.h"
#include "gguf/gguf.h"
#include "server/cli/cli.h"

#include <cstdio>

namespace cli {

int cmd_info(const std::vector<std::string>& argv) {
    Args args(argv, "info");
    if (args.flag("--help") || args.flag("-h")) {
        std::printf("usage: tinyllm info [MODEL.gguf]\n       tinyllm info --devices   (the compute devices this machine has)\n");
        return 0;
    }
    if (args.flag("--devices")) {
        for (const auto& d : devices::list_present()) std::printf("%-10s %s\n", d.name.c_str(), d.description.c_str());
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
