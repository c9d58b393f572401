// GDN kernels with a fp32 state / checkpoint (all head sizes, all step modes).
#include "gdn/gdn_dispatch.cuh"

namespace rssm {
namespace gdn {
RSSM_GDN_INSTANTIATE(float)
}  // namespace gdn
}  // namespace rssm
