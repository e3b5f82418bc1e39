// CancelScope (tokenizer.h): a per-thread stack of "should this work stop?" questions, asked rarely
// enough (once per CHECK_BYTES of work) that the question may cost a system call.
#include "tokenizer/tokenizer.h"

namespace tok {

namespace {
thread_local CancelScope* g_scope = nullptr;
}

CancelScope::CancelScope(std::function<bool()> cancelled) : cancelled_(std::move(cancelled)), previous_(g_scope) { g_scope = this; }

CancelScope::~CancelScope() { g_scope = previous_; }

bool CancelScope::should_stop(size_t bytes) {
    CancelScope* s = g_scope;
    if (!s) return false;
    if (s->stopped_) return true;
    s->since_check_ += bytes;
    if (s->since_check_ < CHECK_BYTES) return false;
    s->since_check_ = 0;
    s->stopped_ = s->cancelled_ && s->cancelled_();
    return s->stopped_;
}

void CancelScope::check(size_t bytes) {
    if (should_stop(bytes)) throw Cancelled("[tokenizer] encoding stopped: the caller cancelled it");
}

}  // namespace tok
