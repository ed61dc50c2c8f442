// Overload{lambdas...}: one visitor for std::visit from several lambdas (the usual idiom), in
// one place for every room that visits a variant.
#pragma once

namespace tb {

template <class... Fs>
struct Overload : Fs... {
  using Fs::operator()...;
};

}  // namespace tb
