// QpStream: the bookkeeping of one RDMA queue pair's two byte streams, apart from the verbs, so
// the chunk accounting is unit-tested without a device (RdmaComm drives it; rdma.cc).
//
// Sending: the exchange queues stripes (pointer, length); next_send() packs the next bytes, up
// to one chunk, into a free send slot (a registered bounce buffer) and says which slot and how
// many bytes to post; send_done(slot) frees the slot when its completion arrives.
// Receiving: `depth` receive slots are posted; received(slot, len) records a completion, in
// completion order, which on a reliable connection is the order the peer sent. consume()
// copies arrived bytes into the exchange's receive stripes in order and hands back every slot
// it emptied, to be posted again. A slot only partly consumed (the rest belongs to a later
// exchange: the byte stream does not respect chunk boundaries) stays queued, as do slots that
// arrived before an exchange wanted them; both carry over to the next exchange.
//
// Owns no memory: the slots are `depth` chunks of `chunk` bytes each, in two arrays the caller
// owns (and has registered). Not thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <vector>

namespace tb::collective {

class QpStream {
 public:
  struct Chunk {
    int slot;
    size_t len;
  };

  QpStream(char* send_slots, char* recv_slots, int depth, size_t chunk);

  int depth() const { return depth_; }
  size_t chunk() const { return chunk_; }
  char* send_slot(int slot) const { return send_slots_ + static_cast<size_t>(slot) * chunk_; }
  char* recv_slot(int slot) const { return recv_slots_ + static_cast<size_t>(slot) * chunk_; }

  // This exchange's stripes, in stream order. `p` must stay valid until done.
  void add_send(const char* p, size_t len);
  void add_recv(char* p, size_t len);

  // The next chunk to post, already copied into a free send slot; nullopt when every slot is in
  // flight or nothing is left to send.
  std::optional<Chunk> next_send();
  // The send in `slot` completed.
  void send_done(int slot);
  // A receive completion: `len` bytes arrived in `slot` (which must be posted).
  void received(int slot, size_t len);
  // Copies arrived bytes into the wanted receives; appends emptied slots to `repost` (they are
  // then counted as posted). Returns the bytes copied.
  size_t consume(std::vector<int>& repost);

  bool sends_done() const { return send_head_ == sends_.size() && in_flight_ == 0; }
  bool recvs_done() const { return recv_head_ == recvs_.size(); }
  bool done() const { return sends_done() && recvs_done(); }
  int sends_in_flight() const { return in_flight_; }
  size_t queued_bytes() const;  // arrived and not yet consumed
  int posted_recvs() const { return posted_; }
  // Forgets the exchange's stripes (after a failure; the comm is unusable then anyway).
  void clear_exchange();

 private:
  struct Stripe {
    char* p;
    size_t len, done;
  };
  struct Arrived {
    int slot;
    size_t len, off;
  };

  char* send_slots_;
  char* recv_slots_;
  int depth_;
  size_t chunk_;
  std::vector<Stripe> sends_, recvs_;
  size_t send_head_ = 0, recv_head_ = 0;
  std::vector<int> free_send_;   // send slots not in flight
  std::vector<char> send_busy_;  // by slot, to catch a completion for a slot not in flight
  int in_flight_ = 0;
  std::deque<Arrived> arrived_;  // completed receives, stream order
  std::vector<char> recv_posted_;
  int posted_;
};

}  // namespace tb::collective
