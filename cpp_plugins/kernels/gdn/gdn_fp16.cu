// GDN kernels with a fp16 state / checkpoint (all head sizes, all step modes).
#include "gdn/gdn_dispatch.cuh"

namespace rssm {
namespace gdn {
RSSM_GDN_INSTANTIATE(__half)
}  // namespace gdn
}  // namespace rssm
