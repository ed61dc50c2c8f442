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
      posted_(depth) {
  TB_CHECK(depth > 0 && chunk > 0);
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
  if (free_send_.empty() || send_head_ == sends_.size()) return std::nullopt;
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
  return Chunk{slot, len};
}

void QpStream::send_done(int slot) {
  TB_CHECK(slot >= 0 && slot < depth_ && send_busy_[static_cast<size_t>(slot)]);
  send_busy_[static_cast<size_t>(slot)] = 0;
  free_send_.push_back(slot);
  --in_flight_;
}

void QpStream::received(int slot, size_t len) {
  TB_CHECK(slot >= 0 && slot < depth_ && recv_posted_[static_cast<size_t>(slot)]);
  TB_CHECK(len <= chunk_);
  recv_posted_[static_cast<size_t>(slot)] = 0;
  --posted_;
  // An empty message carries nothing; its slot goes straight back (consume() reposts it).
  arrived_.push_back(Arrived{slot, len, 0});
}

size_t QpStream::consume(std::vector<int>& repost) {
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
      recv_posted_[static_cast<size_t>(a.slot)] = 1;
      ++posted_;
      repost.push_back(a.slot);
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

void QpStream::clear_exchange() {
  sends_.clear();
  recvs_.clear();
  send_head_ = recv_head_ = 0;
}

}  // namespace tb::collective
