// A server on several ranks: rank 0 runs HTTP and, before each batch, broadcasts the batch's
// generation requests to the other ranks, which run the same engine call (every rank of the
// engine takes part in generate()); a shutdown message ends them. The messages are i64 words
// broadcast over the world: a header (kind, length), then the words.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "meshflow/comm/communicator.h"
#include "meshflow/infer/engine.h"

namespace mf::serve {

// What the server runs for every batch: Engine::generate, or a stand-in in tests.
using GenerateFn = std::function<std::vector<infer::GenerationResult>(const std::vector<infer::GenerationRequest>&,
                                                                      const infer::TokenCallback&)>;

std::vector<int64_t> encode_batch(const std::vector<infer::GenerationRequest>& rows);
// Throws when the words are not a batch encode_batch wrote.
std::vector<infer::GenerationRequest> decode_batch(const std::vector<int64_t>& words);

// Rank 0: broadcasts a batch to the other ranks (null: the shutdown message). Collective over `world`.
void send_batch(comm::Communicator& world, const std::vector<infer::GenerationRequest>* rows);
// The other ranks: the next batch rank 0 sends; nullopt for the shutdown message.
std::optional<std::vector<infer::GenerationRequest>> receive_batch(comm::Communicator& world);

// The loop of every rank but 0: runs `generate` on each batch rank 0 serves, with a callback
// that leaves the decisions to rank 0 (the engine takes its rank 0's), until the shutdown
// message. Returns the number of batches run.
int64_t follow(const GenerateFn& generate, comm::Communicator& world);

}  // namespace mf::serve
