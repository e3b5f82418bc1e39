// LLVM 19: ORC LLJIT for CPU kernels and an object compiler for the NULL device. The only file of the
// CPU device that includes LLVM headers. Facts: ../shared/notes/amd-toolchain.md ("CMake and LLVM").
#include "devices/cpu/cpu_impl.h"
#include "devices/env.h"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/Config/llvm-config.h>

#include <sys/mman.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>

namespace devices::cpu {

namespace {

std::string to_string(llvm::Error e) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << e;
    return os.str();
}

// The host's target, and AMDGPU's only for the NULL device: initializing all of LLVM's targets touched
// each one's code, resident memory for nothing.
void init_llvm(Arch arch) {
    static std::once_flag host, amdgpu;
    std::call_once(host, [] {
        llvm::InitializeNativeTarget();
        llvm::InitializeNativeTargetAsmPrinter();
        llvm::InitializeNativeTargetAsmParser();
    });
    if (arch == Arch::AMDGCN)
        std::call_once(amdgpu, [] {
            LLVMInitializeAMDGPUTargetInfo();
            LLVMInitializeAMDGPUTarget();
            LLVMInitializeAMDGPUTargetMC();
            LLVMInitializeAMDGPUAsmPrinter();
            LLVMInitializeAMDGPUAsmParser();
        });
}

std::unique_ptr<llvm::Module> parse(const std::string& ir, llvm::LLVMContext& ctx, const char* who) {
    llvm::SMDiagnostic diag;
    auto mod = llvm::parseIR(llvm::MemoryBufferRef(ir, "kernel"), diag, ctx);
    if (!mod) {
        std::string msg;
        llvm::raw_string_ostream os(msg);
        diag.print("kernel", os);
        throw Error(std::string("[devices] ") + who + ": generated LLVM IR does not parse: " + os.str());
    }
    std::string verr;
    llvm::raw_string_ostream vos(verr);
    if (llvm::verifyModule(*mod, &vos))
        throw Error(std::string("[devices] ") + who + ": generated LLVM IR is invalid: " + vos.str());
    return mod;
}

// The standard O3 pipeline with the target's cost model, so the loop vectorizer uses the host's vectors.
void optimize(llvm::Module& mod, llvm::TargetMachine* tm) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(tm, pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
    mpm.run(mod, mam);
}

// The module as an object file for `tm`'s target.
std::vector<char> emit_object(llvm::Module& mod, llvm::TargetMachine& tm, const char* who) {
    llvm::SmallVector<char, 0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm.addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile))
        throw Error(std::string("[devices] ") + who + ": " + tm.getTargetTriple().str() + " cannot emit object files");
    pm.run(mod);
    return std::vector<char>(buf.begin(), buf.end());
}

// Gives back libLLVM's code pages mapped in this process. Its static constructors alone touch ~40 MiB
// of its text at start-up, and loading a kernel from the cache needs little of it (1B Q8_0 bench: peak
// RSS 1205 → 1168 MB; llama.cpp's 1128). They are clean pages of the library file: the next compile
// faults back in from the page cache what it uses.
void release_llvm_code() {
    std::FILE* maps = std::fopen("/proc/self/maps", "r");
    if (!maps) return;
    char line[1024];
    while (std::fgets(line, sizeof line, maps)) {
        unsigned long begin, end;
        char perms[8];
        int path = 0;
        if (std::sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &begin, &end, perms, &path) != 3 || path == 0) continue;
        const char* slash = std::strrchr(line + path, '/');
        if (perms[1] == '-' && perms[2] == 'x' && slash && std::strncmp(slash + 1, "libLLVM", 7) == 0)
            madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    }
    std::fclose(maps);
}

}  // namespace

struct LlvmJit::Impl {
    KernelCache cache;
    std::mutex mu;
    std::unique_ptr<llvm::orc::LLJIT> jit;
    std::unique_ptr<llvm::TargetMachine> tm;
    std::map<std::string, void*> compiled;
};

LlvmJit::LlvmJit() : impl_(std::make_unique<Impl>()) {
    init_llvm(Arch::X86_64);
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) throw Error("[devices] CPU: cannot detect the host target: " + to_string(jtmb.takeError()));
    jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    auto tm = jtmb->createTargetMachine();
    if (!tm) throw Error("[devices] CPU: cannot create a target machine: " + to_string(tm.takeError()));
    impl_->tm = std::move(*tm);
    impl_->cache.set_target(impl_->tm->getTargetTriple().str() + " " + impl_->tm->getTargetCPU().str() + " " +
                            impl_->tm->getTargetFeatureString().str() + " LLVM " LLVM_VERSION_STRING);
    auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
    if (!jit) throw Error("[devices] CPU: cannot create the LLVM JIT: " + to_string(jit.takeError()));
    impl_->jit = std::move(*jit);
    // Generated code may call libm (sinf, ...): resolve from the process.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        impl_->jit->getDataLayout().getGlobalPrefix());
    if (!gen) throw Error("[devices] CPU: " + to_string(gen.takeError()));
    impl_->jit->getMainJITDylib().addGenerator(std::move(*gen));
    release_llvm_code();
}

LlvmJit::~LlvmJit() = default;

void* LlvmJit::compile(const std::string& ir, const std::string& entry) {
    std::lock_guard lock(impl_->mu);
    if (auto it = impl_->compiled.find(entry); it != impl_->compiled.end()) return it->second;
    const std::string key = impl_->cache.key(ir, entry);
    std::vector<char> object = impl_->cache.load(key);
    if (env::debug() >= 2) std::fprintf(stderr, "[devices] CPU: %s %s\n", object.empty() ? "compiling" : "from the kernel cache:", entry.c_str());
    if (object.empty()) {
        llvm::LLVMContext ctx;
        auto mod = parse(ir, ctx, "CPU");
        mod->setDataLayout(impl_->tm->createDataLayout());
        mod->setTargetTriple(impl_->tm->getTargetTriple().str());
        optimize(*mod, impl_->tm.get());
        object = emit_object(*mod, *impl_->tm, "CPU");
        impl_->cache.store(key, object);
    }
    auto buf = llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(object.data(), object.size()), entry);
    if (auto err = impl_->jit->addObjectFile(std::move(buf)))
        throw Error("[devices] CPU: cannot add kernel '" + entry + "': " + to_string(std::move(err)));
    auto sym = impl_->jit->lookup(entry);
    if (!sym) throw Error("[devices] CPU: kernel '" + entry + "' not found: " + to_string(sym.takeError()));
    void* fn = sym->toPtr<void*>();
    impl_->compiled[entry] = fn;
    release_llvm_code();
    return fn;
}

std::vector<char> compile_to_object(const std::string& ir, const Target& target) {
    init_llvm(target.arch);
    std::string triple = target.arch == Arch::AMDGCN ? "amdgcn-amd-amdhsa" : llvm::sys::getProcessTriple();
    std::string cpu = target.cpu.empty() && target.arch == Arch::X86_64 ? llvm::sys::getHostCPUName().str() : target.cpu;
    std::string err;
    const llvm::Target* t = llvm::TargetRegistry::lookupTarget(triple, err);
    if (!t) throw Error("[devices] NULL: no LLVM target for " + triple + ": " + err);
    std::unique_ptr<llvm::TargetMachine> tm(
        t->createTargetMachine(triple, cpu, "", llvm::TargetOptions(), std::nullopt));
    if (!tm) throw Error("[devices] NULL: cannot create a target machine for " + triple + " " + cpu);
    llvm::LLVMContext ctx;
    auto mod = parse(ir, ctx, "NULL");
    mod->setDataLayout(tm->createDataLayout());
    mod->setTargetTriple(triple);
    optimize(*mod, tm.get());
    return emit_object(*mod, *tm, "NULL");
}

}  // namespace devices::cpu
