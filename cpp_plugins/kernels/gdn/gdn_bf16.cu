// GDN kernels with a bf16 state / checkpoint (all head sizes, all step modes).
#include "gdn/gdn_dispatch.cuh"

namespace rssm {
namespace gdn {
RSSM_GDN_INSTANTIATE(__nv_bfloat16)
}  // namespace gdn
}  // namespace rssm
