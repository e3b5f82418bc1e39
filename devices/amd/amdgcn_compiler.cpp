// Engine kernels for AMD GPUs, in process: LLVM IR -> amdgcn object (the AMDGPU TargetMachine at O3) ->
// linked code object (lld's ELF driver), and the host twin of a kernel that the fake GPU runs in place of
// its machine code. Facts: ../shared/notes/amd-toolchain.md ("At run time, the LLVM C++ API ... lld").
#include "devices/amd/amdgcn_compiler.h"
#include "devices/device.h"

#include <lld/Common/Driver.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicsAMDGPU.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <mutex>

LLD_HAS_DRIVER(elf)

namespace amd {

namespace {

[[noreturn]] void fail(const std::string& what) { throw devices::Error("[devices] AMD: " + what); }

void init_llvm() {
    static std::once_flag once;
    std::call_once(once, [] {
        llvm::InitializeAllTargetInfos();
        llvm::InitializeAllTargets();
        llvm::InitializeAllTargetMCs();
        llvm::InitializeAllAsmPrinters();
        llvm::InitializeAllAsmParsers();
    });
}

std::unique_ptr<llvm::Module> parse(const std::string& ir, llvm::LLVMContext& ctx, const std::string& where) {
    llvm::SMDiagnostic diag;
    auto mod = llvm::parseIR(llvm::MemoryBufferRef(ir, where), diag, ctx);
    if (!mod) {
        std::string msg;
        llvm::raw_string_ostream os(msg);
        diag.print(where.c_str(), os);
        fail(where + ": LLVM IR does not parse: " + os.str());
    }
    std::string verr;
    llvm::raw_string_ostream vos(verr);
    if (llvm::verifyModule(*mod, &vos)) fail(where + ": LLVM IR is invalid: " + vos.str());
    return mod;
}

// The standard O3 pipeline; with the AMDGPU target machine it includes address-space inference, so the
// flat pointers of the kernel body become global loads and stores.
void optimize(llvm::Module& mod, llvm::TargetMachine& tm) {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(&tm);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(mod, mam);
}

// A file in the temp directory for lld's input and output, removed with the object.
struct TempFile {
    std::string path;
    TempFile() {
        const char* dir = std::getenv("TMPDIR");
        std::string templ = std::string(dir && *dir ? dir : "/tmp") + "/tinyllm-amdgcn-XXXXXX";
        int fd = mkstemp(templ.data());
        if (fd < 0) fail("cannot create a temporary file in " + templ.substr(0, templ.rfind('/')) + " for lld");
        ::close(fd);
        path = templ;
    }
    ~TempFile() { ::unlink(path.c_str()); }
};

// lld -shared: the relocatable object becomes a loadable code object (ET_DYN, dynamic relocations).
std::vector<uint8_t> link(llvm::ArrayRef<char> object, const std::string& where) {
    static std::mutex mu;  // lld keeps global state between links
    std::lock_guard lock(mu);
    TempFile in, out;
    {
        std::ofstream f(in.path, std::ios::binary);
        f.write(object.data(), std::streamsize(object.size()));
        if (!f) fail(where + ": cannot write " + in.path);
    }
    std::string messages;
    llvm::raw_string_ostream os(messages);
    const char* args[] = {"ld.lld", "-shared", "--no-undefined", "--threads=1", in.path.c_str(), "-o", out.path.c_str()};
    lld::Result r = lld::lldMain(args, os, os, {{lld::Gnu, &lld::elf::link}});
    if (r.retCode != 0 || !r.canRunAgain) fail(where + ": lld failed: " + os.str());
    std::ifstream f(out.path, std::ios::binary);
    std::vector<uint8_t> code(std::istreambuf_iterator<char>(f), {});
    if (code.empty()) fail(where + ": lld wrote no code object");
    return code;
}

}  // namespace

std::vector<uint8_t> compile_code_object(const std::string& ir, const std::string& gfx, const std::string& where) {
    init_llvm();
    const std::string triple = "amdgcn-amd-amdhsa";
    std::string err;
    const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
    if (!target) fail("this LLVM has no AMDGPU target: " + err);
    // Asked first: a target machine for an unknown processor only warns on stderr and compiles generic code.
    std::unique_ptr<llvm::MCSubtargetInfo> generic(target->createMCSubtargetInfo(triple, "", ""));
    if (!generic || !generic->isCPUStringValid(gfx)) fail("LLVM 19 cannot compile for '" + gfx + "'");
    std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(triple, gfx, "", llvm::TargetOptions(), llvm::Reloc::PIC_,
                                                                        std::nullopt, llvm::CodeGenOptLevel::Aggressive));
    if (!tm) fail("LLVM 19 cannot compile for '" + gfx + "'");
    llvm::LLVMContext ctx;
    auto mod = parse(ir, ctx, where);
    mod->setDataLayout(tm->createDataLayout());
    mod->setTargetTriple(triple);
    optimize(*mod, *tm);
    llvm::SmallVector<char, 0> object;
    llvm::raw_svector_ostream os(object);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::ObjectFile)) fail("LLVM cannot emit " + gfx + " objects");
    pm.run(*mod);
    return link(object, where + " (" + gfx + ")");
}

std::string host_twin_ir(const std::string& ir, const std::string& kernel, std::span<const uint32_t> arg_offsets) {
    std::string where = "host twin of '" + kernel + "'";
    llvm::LLVMContext ctx;
    auto mod = parse(ir, ctx, kernel);
    llvm::Function* k = mod->getFunction(kernel);
    if (!k || k->getCallingConv() != llvm::CallingConv::AMDGPU_KERNEL) fail(where + ": the IR has no amdgpu_kernel '" + kernel + "'");
    if (arg_offsets.size() != k->arg_size())
        fail(where + ": " + std::to_string(arg_offsets.size()) + " kernarg offsets for " + std::to_string(k->arg_size()) + " arguments");

    // The body: the kernel as a plain function of its arguments and the two ids it may read.
    llvm::Type* i32 = llvm::Type::getInt32Ty(ctx);
    llvm::Type* i64 = llvm::Type::getInt64Ty(ctx);
    std::vector<llvm::Type*> params(k->getFunctionType()->param_begin(), k->getFunctionType()->param_end());
    size_t n_args = params.size();
    params.push_back(i32);  // workgroup id x
    params.push_back(i32);  // work-item id x
    auto* body = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), params, false),
                                        llvm::GlobalValue::InternalLinkage, kernel + ".body", *mod);
    body->splice(body->begin(), k);
    for (size_t i = 0; i < n_args; i++) {
        k->getArg(unsigned(i))->replaceAllUsesWith(body->getArg(unsigned(i)));
        body->addParamAttrs(unsigned(i), llvm::AttrBuilder(ctx, k->getAttributes().getParamAttrs(unsigned(i))));
    }
    k->eraseFromParent();
    std::vector<llvm::CallInst*> ids;
    for (llvm::Function& f : *mod)
        for (llvm::Instruction& inst : llvm::instructions(f))
            if (auto* call = llvm::dyn_cast<llvm::CallInst>(&inst); call && call->getCalledFunction() &&
                                                                    call->getCalledFunction()->getName().starts_with("llvm.amdgcn."))
                ids.push_back(call);
    for (llvm::CallInst* call : ids) {
        llvm::Intrinsic::ID id = call->getCalledFunction()->getIntrinsicID();
        if (call->getFunction() != body || (id != llvm::Intrinsic::amdgcn_workgroup_id_x && id != llvm::Intrinsic::amdgcn_workitem_id_x))
            fail(where + ": uses " + call->getCalledFunction()->getName().str() + ", which a host twin cannot provide");
        call->replaceAllUsesWith(body->getArg(unsigned(id == llvm::Intrinsic::amdgcn_workgroup_id_x ? n_args : n_args + 1)));
        call->eraseFromParent();
    }
    for (auto it = mod->begin(); it != mod->end();) {
        llvm::Function& f = *it++;
        if (f.isDeclaration() && f.use_empty() && f.getName().starts_with("llvm.amdgcn.")) f.eraseFromParent();
    }
    for (llvm::Function& f : *mod)
        if (f.getCallingConv() != llvm::CallingConv::C) fail(where + ": function '" + f.getName().str() + "' has a GPU calling convention");

    // The entry: for each workgroup, for each work-item, the kernel with its arguments from the kernarg bytes.
    llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
    auto* twin = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, i64, i64, i64}, false),
                                        llvm::GlobalValue::ExternalLinkage, kernel + ".twin", *mod);
    llvm::Value *kernarg = twin->getArg(0), *group_begin = twin->getArg(1), *group_end = twin->getArg(2), *block = twin->getArg(3);
    auto bb = [&](const char* name) { return llvm::BasicBlock::Create(ctx, name, twin); };
    llvm::BasicBlock *entry = bb("entry"), *g_hdr = bb("group.hdr"), *g_body = bb("group.body"), *i_hdr = bb("item.hdr"),
                     *i_body = bb("item.body"), *g_latch = bb("group.latch"), *exit = bb("exit");
    llvm::IRBuilder<> b(entry);
    std::vector<llvm::Value*> args;
    for (size_t i = 0; i < n_args; i++) {
        llvm::Value* at = b.CreateConstGEP1_64(b.getInt8Ty(), kernarg, arg_offsets[i]);
        args.push_back(b.CreateAlignedLoad(params[i], at, llvm::Align(1)));
    }
    b.CreateBr(g_hdr);
    b.SetInsertPoint(g_hdr);
    llvm::PHINode* g = b.CreatePHI(i64, 2);
    g->addIncoming(group_begin, entry);
    b.CreateCondBr(b.CreateICmpSLT(g, group_end), g_body, exit);
    b.SetInsertPoint(g_body);
    b.CreateBr(i_hdr);
    b.SetInsertPoint(i_hdr);
    llvm::PHINode* item = b.CreatePHI(i64, 2);
    item->addIncoming(b.getInt64(0), g_body);
    b.CreateCondBr(b.CreateICmpSLT(item, block), i_body, g_latch);
    b.SetInsertPoint(i_body);
    std::vector<llvm::Value*> call_args = args;
    call_args.push_back(b.CreateTrunc(g, i32));
    call_args.push_back(b.CreateTrunc(item, i32));
    b.CreateCall(body, call_args);
    item->addIncoming(b.CreateAdd(item, b.getInt64(1)), i_body);
    b.CreateBr(i_hdr);
    b.SetInsertPoint(g_latch);
    g->addIncoming(b.CreateAdd(g, b.getInt64(1)), g_latch);
    b.CreateBr(g_hdr);
    b.SetInsertPoint(exit);
    b.CreateRetVoid();

    mod->setTargetTriple("");  // the CPU JIT sets the host's
    mod->setDataLayout("");
    std::string verr;
    llvm::raw_string_ostream vos(verr);
    if (llvm::verifyModule(*mod, &vos)) fail(where + ": invalid IR: " + vos.str());
    std::string text;
    llvm::raw_string_ostream os(text);
    mod->print(os, nullptr);
    return os.str();
}

}  // namespace amd
