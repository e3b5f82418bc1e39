// The request queue: arrival order, up to n_running requests on the model at once, a bounded number waiting;
// and the few slots for preparing prompts before a request joins it.
#include "server/server_impl.h"

#include <algorithm>
#include <chrono>

namespace server {

std::unique_ptr<RequestQueue::Ticket> RequestQueue::enter() {
    std::lock_guard lock(mutex_);
    if (int(line_.size()) >= n_running_ + max_waiting_) return nullptr;  // the running ones plus max_waiting behind them
    line_.push_back(next_);
    return std::make_unique<Ticket>(*this, next_++);
}

RequestQueue::Ticket::~Ticket() {
    {
        std::lock_guard lock(queue_.mutex_);
        auto& line = queue_.line_;
        line.erase(std::find(line.begin(), line.end(), number_));
    }
    queue_.turn_.notify_all();
}

bool RequestQueue::Ticket::wait_turn(const std::function<bool()>& gone) {
    std::unique_lock lock(queue_.mutex_);
    // Wake up now and then to notice a client that gave up waiting.
    auto my_turn = [&] {
        const auto& line = queue_.line_;
        return std::find(line.begin(), line.end(), number_) - line.begin() < queue_.n_running_;
    };
    while (!my_turn()) {
        queue_.turn_.wait_for(lock, std::chrono::milliseconds(50));
        if (!my_turn() && gone()) return false;
    }
    return true;
}

void RequestQueue::set_running(int n) {
    {
        std::lock_guard lock(mutex_);
        n_running_ = std::max(1, n);
    }
    turn_.notify_all();
}

int RequestQueue::waiting() const {
    std::lock_guard lock(mutex_);
    return std::max(0, int(line_.size()) - n_running_);
}

int RequestQueue::running() const {
    std::lock_guard lock(mutex_);
    return std::min(int(line_.size()), n_running_);
}

bool RequestQueue::busy() const {
    std::lock_guard lock(mutex_);
    return !line_.empty();
}

PromptSlots::Slot::Slot(PromptSlots& slots, const std::function<bool()>& gone) : slots_(slots) {
    std::unique_lock lock(slots_.mutex_);
    while (slots_.free_ == 0) {
        slots_.freed_.wait_for(lock, std::chrono::milliseconds(50));
        if (slots_.free_ == 0 && gone()) return;
    }
    slots_.free_--;
    held_ = true;
}

PromptSlots::Slot::~Slot() {
    if (!held_) return;
    {
        std::lock_guard lock(slots_.mutex_);
        slots_.free_++;
    }
    slots_.freed_.notify_one();
}

}  // namespace server
