#include "collective/rdma/stream.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace tb::collective {

QpStream::QpStream(char* send_slots, char* recv_slots, int depth, size_t chunk)
    : send_slots_(send_slots),
      recv_slots_(recv_slots),
      depth_(depth),
      chunk_(chunk),
      send_busy_(static_cast<size_t>(depth), 0),
      recv_posted_(static_cast<size_t>(depth), 1),
      posted_(depth),
      credits_(depth),
      threshold_(std::max(2, depth / 4)) {
  // Two credits for a data message, and a threshold below what a starved sender leaves owed.
  TB_CHECK(depth >= 4 && chunk > 0);
  // Lowest slot first, so a quiet stream reuses one warm buffer.
  for (int s = depth - 1; s >= 0; --s) free_send_.push_back(s);
}

void QpStream::add_send(const char* p, size_t len) {
  if (len > 0) sends_.push_back(Stripe{const_cast<char*>(p), len, 0});
}

void QpStream::add_recv(char* p, size_t len) {
  if (len > 0) recvs_.push_back(Stripe{p, len, 0});
}

std::optional<QpStream::Chunk> QpStream::next_send() {
  if (free_send_.empty() || send_head_ == sends_.size() || credits_ < 2) return std::nullopt;
  const int slot = free_send_.back();
  free_send_.pop_back();
  char* dst = send_slot(slot);
  size_t len = 0;
  // Pack consecutive stripes: the receiver reads a byte stream, not messages.
  while (len < chunk_ && send_head_ < sends_.size()) {
    Stripe& s = sends_[send_head_];
    const size_t n = std::min(chunk_ - len, s.len - s.done);
    std::memcpy(dst + len, s.p + s.done, n);
    len += n;
    s.done += n;
    if (s.done == s.len) ++send_head_;
  }
  if (send_head_ == sends_.size()) {  // all copied out: the user's buffers are free
    sends_.clear();
    send_head_ = 0;
  }
  send_busy_[static_cast<size_t>(slot)] = 1;
  ++in_flight_;
  --credits_;
  const uint32_t give = owed_;
  owed_ = 0;
  return Chunk{slot, len, give};
}

void QpStream::send_done(int slot) {
  TB_CHECK(slot >= 0 && slot < depth_ && send_busy_[static_cast<size_t>(slot)]);
  send_busy_[static_cast<size_t>(slot)] = 0;
  free_send_.push_back(slot);
  --in_flight_;
}

std::optional<uint32_t> QpStream::next_credit() {
  if (owed_ < static_cast<uint32_t>(threshold_) || credits_ < 1 ||
      credit_in_flight_ >= kMaxCreditSends)
    return std::nullopt;
  --credits_;
  ++credit_in_flight_;
  const uint32_t give = owed_;
  owed_ = 0;
  return give;
}

void QpStream::credit_done() {
  TB_CHECK(credit_in_flight_ > 0);
  --credit_in_flight_;
}

void QpStream::received(int slot, size_t len, uint32_t credits) {
  TB_CHECK(slot >= 0 && slot < depth_ && recv_posted_[static_cast<size_t>(slot)]);
  TB_CHECK(len <= chunk_);
  // More credits than receives this side can have outstanding would be a peer's bug.
  TB_CHECK(credits <= static_cast<uint32_t>(depth_) &&
           credits_ + static_cast<int>(credits) <= depth_);
  credits_ += static_cast<int>(credits);
  recv_posted_[static_cast<size_t>(slot)] = 0;
  --posted_;
  if (len == 0)
    empty_.push_back(slot);  // a credit-only message: nothing to wait for
  else
    arrived_.push_back(Arrived{slot, len, 0});
}

size_t QpStream::consume(std::vector<int>& repost) {
  auto give_back = [&](int slot) {
    recv_posted_[static_cast<size_t>(slot)] = 1;
    ++posted_;
    ++owed_;
    repost.push_back(slot);
  };
  for (int slot : empty_) give_back(slot);
  empty_.clear();
  size_t copied = 0;
  while (!arrived_.empty()) {
    Arrived& a = arrived_.front();
    if (a.off < a.len) {
      if (recv_head_ == recvs_.size()) break;  // the rest belongs to a later exchange
      Stripe& s = recvs_[recv_head_];
      const size_t n = std::min(a.len - a.off, s.len - s.done);
      std::memcpy(s.p + s.done, recv_slot(a.slot) + a.off, n);
      a.off += n;
      s.done += n;
      copied += n;
      if (s.done == s.len) ++recv_head_;
    }
    if (a.off == a.len) {
      give_back(a.slot);
      arrived_.pop_front();
    }
  }
  if (recv_head_ == recvs_.size()) {  // every stripe filled: the next exchange starts clean
    recvs_.clear();
    recv_head_ = 0;
  }
  return copied;
}

size_t QpStream::queued_bytes() const {
  size_t n = 0;
  for (const auto& a : arrived_) n += a.len - a.off;
  return n;
}

const char* QpStream::send_wait() const {
  if (sends_done()) return "";
  if (credits_ < 2) return "sends waiting for the peer's credits (its receive buffers are full)";
  if (free_send_.empty()) return "sends waiting for completions of every send buffer";
  return "sends waiting";
}

void QpStream::clear_exchange() {
  sends_.clear();
  recvs_.clear();
  send_head_ = recv_head_ = 0;
}

}  // namespace tb::collective
