// QpStream: the bookkeeping of one RDMA queue pair's two byte streams, apart from the verbs, so
// the chunk and credit accounting is unit-tested without a device (RdmaComm drives it; rdma.cc).
//
// Sending: the exchange queues stripes (pointer, length); next_send() packs the next bytes, up
// to one chunk, into a free send slot (a registered bounce buffer) and says which slot, how
// many bytes and which immediate value to post; send_done(slot) frees the slot when its
// completion arrives. The exchange's sends are done once every byte is copied out (the user's
// buffers are free then): a step does not wait for the peer's acknowledgement of its last send,
// and a slot is reused only after its completion. drained() says every send was acknowledged.
// Receiving: `depth` receive slots are posted; received(slot, len, credits) records a
// completion, in completion order, which on a reliable connection is the order the peer sent.
// consume() copies arrived bytes into the exchange's receive stripes in order and hands back
// every slot it emptied, to be posted again. A slot only partly consumed (the rest belongs to a
// later exchange: the byte stream does not respect chunk boundaries) stays queued, as do slots
// that arrived before an exchange wanted them; both carry over to the next exchange.
//
// Credits (flow control without receiver-not-ready retries): a sender posts a SEND only into a
// receive buffer it knows the peer has posted. `credits` starts at `depth` (every receive is
// posted before the connection is made) and every message sent takes one; every message carries
// in its immediate data the receives this side posted again since its last message (owed()),
// which the peer adds to its credits. A data message needs 2 credits, keeping the last one for
// a credit-only message (zero bytes, the immediate only): one is due once owed() reaches
// credit_threshold() and a credit is left (next_credit()). A credit-only message's receive
// buffer is posted again at once (it carries no bytes), and is owed like any other; the
// threshold (depth / 4, at least 2) keeps two idle peers from trading credit-only messages for
// ever, and leaves a sender whose receiver waits elsewhere depth - threshold messages of
// buffering (RNR-based flow control gave depth). Neither
// side can end with no credit while the other waits: the last credit-only message of one side
// gives the other >= threshold credits, and the other's next message returns the buffer it
// took. So no SEND ever meets an empty receive queue.
//
// Owns no memory: the slots are `depth` chunks of `chunk` bytes each, in two arrays the caller
// owns (and has registered). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace tb::collective {

class QpStream {
 public:
  struct Chunk {
    int slot;
    size_t len;
    uint32_t credits;  // the immediate data: receives posted again, returned to the peer
  };
  // Credit-only messages in flight at most (each a send queue entry beyond `depth`).
  static constexpr int kMaxCreditSends = 2;

  QpStream(char* send_slots, char* recv_slots, int depth, size_t chunk);

  int depth() const { return depth_; }
  size_t chunk() const { return chunk_; }
  char* send_slot(int slot) const { return send_slots_ + static_cast<size_t>(slot) * chunk_; }
  char* recv_slot(int slot) const { return recv_slots_ + static_cast<size_t>(slot) * chunk_; }

  // This exchange's stripes, in stream order. `p` must stay valid until done.
  void add_send(const char* p, size_t len);
  void add_recv(char* p, size_t len);

  // The next chunk to post, already copied into a free send slot; nullopt when every slot is in
  // flight, fewer than 2 credits are left, or nothing is left to send. Takes a credit and
  // returns owed() in Chunk::credits.
  std::optional<Chunk> next_send();
  // The send in `slot` completed.
  void send_done(int slot);
  // A credit-only message to post (its immediate data), when owed() reached the threshold, a
  // credit is left and fewer than kMaxCreditSends are in flight; takes the credit.
  std::optional<uint32_t> next_credit();
  // A credit-only send completed.
  void credit_done();
  // A receive completion: `len` bytes arrived in `slot` (which must be posted), with `credits`
  // in its immediate data. An empty message (credit-only) hands its slot to the next consume().
  void received(int slot, size_t len, uint32_t credits);
  // Copies arrived bytes into the wanted receives; appends emptied slots to `repost` (they are
  // then counted as posted and owed to the peer: post them before the next next_send() or
  // next_credit()). Returns the bytes copied.
  size_t consume(std::vector<int>& repost);

  bool sends_done() const { return send_head_ == sends_.size(); }  // every byte copied out
  bool recvs_done() const { return recv_head_ == recvs_.size(); }
  bool done() const { return sends_done() && recvs_done(); }
  bool drained() const { return in_flight_ == 0 && credit_in_flight_ == 0; }
  int sends_in_flight() const { return in_flight_; }
  size_t queued_bytes() const;  // arrived and not yet consumed
  int posted_recvs() const { return posted_; }
  int credits() const { return credits_; }  // the peer's receives this side may still fill
  uint32_t owed() const { return owed_; }   // receives posted again, not yet told to the peer
  int credit_threshold() const { return threshold_; }
  // Why the sends wait, for a timeout message: "" when they do not.
  const char* send_wait() const;
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
  std::vector<int> empty_;       // credit-only receives, to be posted again
  std::vector<char> recv_posted_;
  int posted_;
  int credits_;
  uint32_t owed_ = 0;
  int threshold_;
  int credit_in_flight_ = 0;
};

}  // namespace tb::collective
