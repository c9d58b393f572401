// Descriptor -> kernel params translation. No math, no launches: sizes, strides and pointers.
#include "rssm_kernel_params.h"
#include "io_spec.h"

#include <cstring>
#include <sstream>

namespace rssm {
namespace core {

namespace {
int32_t rssmDtype(std::string const& name) {
    if (name == "fp32") return RSSM_DTYPE_FP32;
    if (name == "fp16") return RSSM_DTYPE_FP16;
    if (name == "bf16") return RSSM_DTYPE_BF16;
    if (name == "fp8_e4m3") return RSSM_DTYPE_FP8_E4M3;
    if (name == "nvfp4") return RSSM_DTYPE_NVFP4;
    throw Error("replayssm core: no kernel dtype code for '" + name + "'");
}
int32_t i32(int64_t v) { return static_cast<int32_t>(v); }
void* mut(TensorDesc const& d) { return const_cast<void*>(d.data); }
bool hasReadCopy(Config const& cfg) { return cfg.kind == PluginKind::kReplayDecode && cfg.e("read_dtype") != "none"; }
void checkOutputs(Config const& cfg, TensorDesc const* out, int32_t nbOutputs) {
    int32_t const n = numOutputs(cfg);
    if (nbOutputs != n || (n > 0 && out == nullptr))
        throw Error(std::string(opName(cfg.kind)) + ": expected " + std::to_string(n) + " outputs; got " +
                    std::to_string(nbOutputs));
}
}  // namespace

Mamba2ReplayParams mamba2ReplaySizes(Config const& cfg, TensorDesc const* in, int32_t nbInputs) {
    if (cfg.kind != PluginKind::kReplayDecode || cfg.e("family") != "mamba2" || hasReadCopy(cfg))
        throw Error(std::string(opName(cfg.kind)) +
                    ": toMamba2ReplayParams needs ReplayDecode with family 'mamba2' and read_dtype 'none'");
    Symbols s = checkInputsSymbols(cfg, in, nbInputs);
    Mamba2ReplayParams p;
    std::memset(&p, 0, sizeof(p));
    p.batch = i32(s.at("B"));
    p.num_tokens = i32(s.at("T"));
    p.nheads = i32(s.at("H"));
    p.headdim = i32(s.at("P"));
    p.dstate = i32(s.at("N"));
    p.ngroups = i32(s.at("G"));
    p.num_slots = i32(s.at("S"));
    p.window = i32(cfg.i("window"));
    p.ring_capacity = ringCapacity(cfg);
    p.mode = cfg.e("mode") == "speculative" ? 1 : 0;
    p.state_dtype = rssmDtype(cfg.e("state_dtype"));
    p.act_dtype = rssmDtype(cfg.e("act_dtype"));
    p.dt_dtype = cfg.e("dt_dtype") == "fp32" ? RSSM_DTYPE_FP32 : p.act_dtype;
    p.rows_per_cta = 0;
    // Kernel design: the launcher picks the fastest verified one (mamba2.h RSSM_MAMBA2_VARIANT_AUTO).
    p.variant = RSSM_MAMBA2_VARIANT_AUTO;
    return p;
}

Mamba2ReplayParams toMamba2ReplayParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                        TensorDesc const* out, int32_t nbOutputs) {
    using namespace decode_mamba2;
    Mamba2ReplayParams p = mamba2ReplaySizes(cfg, in, nbInputs);
    checkOutputs(cfg, out, nbOutputs);
    TensorDesc const& st = in[kIN_STATE];
    p.stride_state_slot = st.strides[0]; p.stride_state_head = st.strides[1]; p.stride_state_p = st.strides[2];
    p.stride_x_b = in[kIN_X].strides[0]; p.stride_x_t = in[kIN_X].strides[1]; p.stride_x_h = in[kIN_X].strides[2];
    p.stride_dt_b = in[kIN_DT].strides[0]; p.stride_dt_t = in[kIN_DT].strides[1]; p.stride_dt_h = in[kIN_DT].strides[2];
    p.stride_B_b = in[kIN_B].strides[0]; p.stride_B_t = in[kIN_B].strides[1]; p.stride_B_g = in[kIN_B].strides[2];
    p.stride_C_b = in[kIN_C].strides[0]; p.stride_C_t = in[kIN_C].strides[1]; p.stride_C_g = in[kIN_C].strides[2];
    bool const hasZ = cfg.i("has_z") != 0;
    if (hasZ) {
        p.stride_z_b = in[kIN_Z].strides[0]; p.stride_z_t = in[kIN_Z].strides[1]; p.stride_z_h = in[kIN_Z].strides[2];
    }
    TensorDesc const& y = out[kOUT_Y];
    if (y.dtype != in[kIN_X].dtype || y.nbDims != 4)
        throw Error("ReplayDecode: output 0 'y' must be " + std::string(dtypeName(in[kIN_X].dtype)) + " [B, T, H, P]; got " +
                    dtypeName(y.dtype) + " of rank " + std::to_string(y.nbDims));
    p.stride_y_b = y.strides[0]; p.stride_y_t = y.strides[1]; p.stride_y_h = y.strides[2];
    p.state_batch_indices = static_cast<int32_t const*>(in[kIN_SLOTS].data);
    p.ring_origin = static_cast<int32_t const*>(in[kIN_RING_ORIGIN].data);
    p.ring_len = static_cast<int32_t const*>(in[kIN_RING_LEN].data);
    p.state = mut(st);
    p.ring_dt = static_cast<float*>(mut(in[kIN_RING_DT]));
    p.ring_x = mut(in[kIN_RING_X]);
    p.ring_B = mut(in[kIN_RING_B]);
    p.x = in[kIN_X].data;
    p.dt_raw = in[kIN_DT].data;
    p.Bm = in[kIN_B].data;
    p.Cm = in[kIN_C].data;
    p.z = hasZ ? in[kIN_Z].data : nullptr;
    p.A = static_cast<float const*>(in[kIN_A].data);
    p.D = static_cast<float const*>(in[kIN_D].data);
    p.dt_bias = static_cast<float const*>(in[kIN_DT_BIAS].data);
    p.y = mut(y);
    return p;
}

GdnReplayParams gdnReplaySizes(Config const& cfg, TensorDesc const* in, int32_t nbInputs) {
    bool const verify = cfg.kind == PluginKind::kGdnVerify;
    if (!verify && !(cfg.kind == PluginKind::kReplayDecode && cfg.e("family") == "gdn" && !hasReadCopy(cfg)))
        throw Error(std::string(opName(cfg.kind)) +
                    ": toGdnReplayParams needs GdnVerify or ReplayDecode with family 'gdn' and read_dtype 'none'");
    Symbols s = checkInputsSymbols(cfg, in, nbInputs);
    GdnReplayParams p;
    std::memset(&p, 0, sizeof(p));
    p.batch = i32(s.at("B"));
    p.num_tokens = i32(s.at("T"));
    p.num_heads = i32(s.at("H"));
    p.num_v_heads = i32(s.at("HV"));
    p.head_k = i32(s.at("K"));
    p.head_v = i32(s.at("V"));
    p.num_slots = i32(s.at("S"));
    p.window = i32(cfg.i("window"));
    p.ring_capacity = ringCapacity(cfg);
    p.mode = verify ? GDN_REPLAY_SPECULATIVE : GDN_REPLAY_STANDARD;
    p.state_dtype = rssmDtype(cfg.e("state_dtype"));
    p.act_dtype = rssmDtype(cfg.e("act_dtype"));
    p.u_dtype = rssmDtype(cfg.e("u_dtype"));
    p.rows_per_cta = 0;
    // Kernel design: the launcher's automatic choice (gdn.h GDN_VARIANT_AUTO): the split kernels (6) when the
    // adapter passes a large enough workspace and the batch is large, variant 5's warp-item kernel for small-batch
    // standard steps (K = 128, batch x value heads <= 128), else stream kernel 4 (K = 128 / 256) or tile kernel 1
    // (K = 64), the designs measured fastest (docs/kernels-gdn.md).
    p.variant = GDN_VARIANT_AUTO;
    p.scale = static_cast<float>(cfg.f("scale"));  // 0 -> kernel uses K^-0.5
    return p;
}

GdnReplayParams toGdnReplayParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                  TensorDesc const* out, int32_t nbOutputs) {
    using namespace gdn_io;
    GdnReplayParams p = gdnReplaySizes(cfg, in, nbInputs);
    checkOutputs(cfg, out, nbOutputs);
    TensorDesc const& st = in[kIN_STATE];
    p.state_stride_slot = st.strides[0]; p.state_stride_head = st.strides[1]; p.state_stride_v = st.strides[2];
    p.q_stride_b = in[kIN_Q].strides[0]; p.q_stride_t = in[kIN_Q].strides[1]; p.q_stride_h = in[kIN_Q].strides[2];
    p.k_stride_b = in[kIN_K].strides[0]; p.k_stride_t = in[kIN_K].strides[1]; p.k_stride_h = in[kIN_K].strides[2];
    p.v_stride_b = in[kIN_V].strides[0]; p.v_stride_t = in[kIN_V].strides[1]; p.v_stride_h = in[kIN_V].strides[2];
    p.a_stride_b = in[kIN_GATE_A].strides[0]; p.a_stride_t = in[kIN_GATE_A].strides[1];
    p.b_stride_b = in[kIN_GATE_B].strides[0]; p.b_stride_t = in[kIN_GATE_B].strides[1];
    TensorDesc const& o = out[kOUT_O];
    if (o.dtype != in[kIN_V].dtype || o.nbDims != 4)
        throw Error(std::string(opName(cfg.kind)) + ": output 0 'o' must be " + dtypeName(in[kIN_V].dtype) +
                    " [B, T, HV, V]; got " + dtypeName(o.dtype) + " of rank " + std::to_string(o.nbDims));
    p.o_stride_b = o.strides[0]; p.o_stride_t = o.strides[1]; p.o_stride_h = o.strides[2];
    p.ring_g_stride_slot = in[kIN_RING_G].strides[0]; p.ring_g_stride_rec = in[kIN_RING_G].strides[1];
    p.ring_u_stride_slot = in[kIN_RING_U].strides[0]; p.ring_u_stride_rec = in[kIN_RING_U].strides[1];
    p.ring_u_stride_head = in[kIN_RING_U].strides[2];
    p.ring_k_stride_slot = in[kIN_RING_K].strides[0]; p.ring_k_stride_rec = in[kIN_RING_K].strides[1];
    p.ring_k_stride_head = in[kIN_RING_K].strides[2];
    p.state = mut(st);
    p.state_batch_indices = static_cast<int32_t const*>(in[kIN_SLOTS].data);
    p.ring_origin = static_cast<int32_t const*>(in[kIN_RING_ORIGIN].data);
    p.ring_len = static_cast<int32_t const*>(in[kIN_RING_LEN].data);
    p.ring_g = static_cast<float*>(mut(in[kIN_RING_G]));
    p.ring_u = mut(in[kIN_RING_U]);
    p.ring_k = mut(in[kIN_RING_K]);
    p.q = in[kIN_Q].data;
    p.k = in[kIN_K].data;
    p.v = in[kIN_V].data;
    p.a = in[kIN_GATE_A].data;
    p.b = in[kIN_GATE_B].data;
    p.A_log = static_cast<float const*>(in[kIN_A_LOG].data);
    p.dt_bias = static_cast<float const*>(in[kIN_DT_BIAS].data);
    p.o = mut(o);
    return p;
}

ReplayCommitParams toReplayCommitParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                        TensorDesc const* out, int32_t nbOutputs) {
    using namespace commit_io;
    if (cfg.kind != PluginKind::kReplayCommit) throw Error("toReplayCommitParams needs a ReplayCommit config");
    Symbols s = checkInputsSymbols(cfg, in, nbInputs);
    checkOutputs(cfg, out, nbOutputs);
    TensorDesc const& err = out[kOUT_ERROR_SLOT];
    if (err.dtype != DType::kINT32 || err.nbDims != 1 || err.dims[0] != 1)
        throw Error("ReplayCommit: output 0 'error_slot' must be int32 [1]; got " + std::string(dtypeName(err.dtype)) +
                    " of rank " + std::to_string(err.nbDims));
    ReplayCommitParams p;
    std::memset(&p, 0, sizeof(p));
    p.batch = i32(s.at("B"));
    p.num_slots = i32(s.at("S"));
    p.window = i32(cfg.i("window"));
    p.ring_capacity = ringCapacity(cfg);
    p.num_tokens = i32(s.at("T"));
    p.mode = cfg.e("mode") == "speculative" ? 1 : 0;
    p.state_batch_indices = static_cast<int32_t const*>(in[kIN_SLOTS].data);
    p.accepted = cfg.i("has_accepted") ? static_cast<int32_t const*>(in[kIN_ACCEPTED].data) : nullptr;
    p.ring_origin = static_cast<int32_t*>(mut(in[kIN_RING_ORIGIN]));
    p.ring_len = static_cast<int32_t*>(mut(in[kIN_RING_LEN]));
    p.error_slot = static_cast<int32_t*>(mut(err));
    return p;
}

DualPrecisionDecodeParams dualPrecisionDecodeSizes(Config const& cfg, TensorDesc const* in, int32_t nbInputs) {
    if (!hasReadCopy(cfg))
        throw Error(std::string(opName(cfg.kind)) +
                    ": toDualPrecisionDecodeParams needs ReplayDecode with read_dtype fp16 / fp8_e4m3 / nvfp4");
    Symbols s = checkInputsSymbols(cfg, in, nbInputs);
    bool const mamba = cfg.e("family") == "mamba2";
    DualPrecisionDecodeParams p;
    std::memset(&p, 0, sizeof(p));
    p.family = mamba ? RSSM_FAMILY_MAMBA2 : RSSM_FAMILY_GDN;
    p.batch = i32(s.at("B"));
    p.num_tokens = i32(s.at("T"));
    p.num_slots = i32(s.at("S"));
    p.window = i32(cfg.i("window"));
    p.ring_capacity = ringCapacity(cfg);
    p.mode = cfg.e("mode") == "speculative" ? 1 : 0;
    p.nheads = i32(s.at(mamba ? "H" : "HV"));
    p.headdim = i32(s.at(mamba ? "P" : "V"));
    p.dstate = i32(s.at(mamba ? "N" : "K"));
    p.ngroups = i32(s.at(mamba ? "G" : "H"));
    p.act_dtype = rssmDtype(cfg.e("act_dtype"));
    p.recurrence_dtype = rssmDtype(cfg.e("state_dtype"));
    p.read_dtype = rssmDtype(cfg.e("read_dtype"));
    p.dt_dtype = mamba ? (cfg.e("dt_dtype") == "fp32" ? RSSM_DTYPE_FP32 : p.act_dtype) : RSSM_DTYPE_FP32;
    p.scale = mamba ? 0.f : static_cast<float>(cfg.f("scale"));  // 0 -> kernel uses K^-0.5
    return p;
}

DualPrecisionDecodeParams toDualPrecisionDecodeParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                                      TensorDesc const* out, int32_t nbOutputs) {
    DualPrecisionDecodeParams p = dualPrecisionDecodeSizes(cfg, in, nbInputs);
    checkOutputs(cfg, out, nbOutputs);
    bool const mamba = cfg.e("family") == "mamba2";
    auto opt = [&](char const* name) -> void* {
        int32_t idx = inputIndex(cfg, name);
        return idx < 0 ? nullptr : mut(in[idx]);
    };
    TensorDesc const& hp = in[decode_mamba2::kIN_CKPT_HP];  // same position in both families
    TensorDesc const& lp = in[inputIndex(cfg, "ckpt_lp")];
    p.stride_hp_slot = hp.strides[0]; p.stride_hp_head = hp.strides[1]; p.stride_hp_row = hp.strides[2];
    p.stride_lp_slot = lp.strides[0]; p.stride_lp_head = lp.strides[1]; p.stride_lp_row = lp.strides[2];
    p.ckpt_hp = hp.data;
    p.ckpt_hp_scale = static_cast<float const*>(opt("ckpt_hp_scale"));
    p.ckpt_lp = lp.data;
    p.ckpt_lp_scale = opt("ckpt_lp_scale");
    p.ckpt_lp_gscale = static_cast<float const*>(opt("ckpt_lp_gscale"));
    if (mamba) {
        using namespace decode_mamba2;
        TensorDesc const& y = out[kOUT_Y];
        if (y.dtype != in[kIN_X].dtype || y.nbDims != 4)
            throw Error("ReplayDecode: output 0 'y' must be " + std::string(dtypeName(in[kIN_X].dtype)) +
                        " [B, T, H, P]; got " + dtypeName(y.dtype) + " of rank " + std::to_string(y.nbDims));
        p.state_batch_indices = static_cast<int32_t const*>(in[kIN_SLOTS].data);
        p.ring_origin = static_cast<int32_t const*>(in[kIN_RING_ORIGIN].data);
        p.ring_len = static_cast<int32_t const*>(in[kIN_RING_LEN].data);
        p.x = in[kIN_X].data;
        p.dt_raw = in[kIN_DT].data;
        p.Bm = in[kIN_B].data;
        p.Cm = in[kIN_C].data;
        p.z = cfg.i("has_z") ? in[kIN_Z].data : nullptr;
        p.A = static_cast<float const*>(in[kIN_A].data);
        p.D = static_cast<float const*>(in[kIN_D].data);
        p.dt_bias = static_cast<float const*>(in[kIN_DT_BIAS].data);
        p.ring_dt = static_cast<float*>(mut(in[kIN_RING_DT]));
        p.ring_x = mut(in[kIN_RING_X]);
        p.ring_B = mut(in[kIN_RING_B]);
        p.y = mut(y);
    } else {
        using namespace gdn_io;
        TensorDesc const& o = out[kOUT_O];
        if (o.dtype != in[kIN_V].dtype || o.nbDims != 4)
            throw Error("ReplayDecode: output 0 'o' must be " + std::string(dtypeName(in[kIN_V].dtype)) +
                        " [B, T, HV, V]; got " + dtypeName(o.dtype) + " of rank " + std::to_string(o.nbDims));
        p.state_batch_indices = static_cast<int32_t const*>(in[kIN_SLOTS].data);
        p.ring_origin = static_cast<int32_t const*>(in[kIN_RING_ORIGIN].data);
        p.ring_len = static_cast<int32_t const*>(in[kIN_RING_LEN].data);
        p.q = in[kIN_Q].data;
        p.k = in[kIN_K].data;
        p.v = in[kIN_V].data;
        p.a = in[kIN_GATE_A].data;
        p.b = in[kIN_GATE_B].data;
        p.A_log = static_cast<float const*>(in[kIN_A_LOG].data);
        p.gdn_dt_bias = static_cast<float const*>(in[kIN_DT_BIAS].data);
        p.ring_g = static_cast<float*>(mut(in[kIN_RING_G]));
        p.ring_u = mut(in[kIN_RING_U]);
        p.ring_k = mut(in[kIN_RING_K]);
        p.ring_beta = static_cast<float*>(opt("ring_beta"));
        p.ring_v = opt("ring_v");
        p.o = mut(o);
    }
    return p;
}

DualPrecisionFlushParams toDualPrecisionFlushParams(Config const& cfg, TensorDesc const* in, int32_t nbInputs,
                                                    TensorDesc const* out, int32_t nbOutputs) {
    using namespace flush_io;
    if (cfg.kind != PluginKind::kDualPrecisionFlush) throw Error("toDualPrecisionFlushParams needs a DualPrecisionFlush config");
    Symbols s = checkInputsSymbols(cfg, in, nbInputs);
    checkOutputs(cfg, out, nbOutputs);
    bool const mamba = cfg.e("family") == "mamba2";
    DualPrecisionFlushParams p;
    std::memset(&p, 0, sizeof(p));
    p.family = mamba ? RSSM_FAMILY_MAMBA2 : RSSM_FAMILY_GDN;
    p.batch = i32(s.at("B"));
    p.num_tokens = i32(s.at("T"));
    p.num_slots = i32(s.at("S"));
    p.window = i32(cfg.i("window"));
    p.ring_capacity = ringCapacity(cfg);
    p.mode = cfg.e("mode") == "speculative" ? 1 : 0;
    p.nheads = i32(s.at("H"));
    p.headdim = i32(s.at("P"));
    p.dstate = i32(s.at("N"));
    p.ngroups = i32(s.at("G"));
    p.act_dtype = rssmDtype(cfg.e("act_dtype"));
    p.recurrence_dtype = rssmDtype(cfg.e("recurrence_dtype"));
    p.read_dtype = rssmDtype(cfg.e("read_dtype"));
    p.rounding = cfg.e("rounding") == "sr" ? RSSM_ROUNDING_SR : RSSM_ROUNDING_RTN;
    p.layer_index = i32(cfg.i("layer_index"));
    uint64_t const seed = static_cast<uint64_t>(cfg.i("seed"));
    p.seed_lo = static_cast<uint32_t>(seed & 0xFFFFFFFFu);
    p.seed_hi = static_cast<uint32_t>(seed >> 32);
    TensorDesc const& hp = in[kIN_CKPT_HP];
    TensorDesc const& lp = in[kIN_CKPT_LP];
    p.stride_hp_slot = hp.strides[0]; p.stride_hp_head = hp.strides[1]; p.stride_hp_row = hp.strides[2];
    p.stride_lp_slot = lp.strides[0]; p.stride_lp_head = lp.strides[1]; p.stride_lp_row = lp.strides[2];
    p.state_batch_indices = static_cast<int32_t const*>(in[kIN_SLOTS].data);
    p.ring_origin = static_cast<int32_t const*>(in[kIN_RING_ORIGIN].data);
    p.ring_len = static_cast<int32_t const*>(in[kIN_RING_LEN].data);
    p.flush_index = static_cast<int32_t const*>(in[kIN_FLUSH_INDEX].data);
    p.ckpt_hp = mut(hp);
    p.ckpt_lp = mut(lp);
    auto opt = [&](char const* name) -> void* {
        int32_t idx = inputIndex(cfg, name);
        return idx < 0 ? nullptr : mut(in[idx]);
    };
    p.ckpt_hp_scale = static_cast<float*>(opt("ckpt_hp_scale"));
    p.ckpt_lp_scale = opt("ckpt_lp_scale");
    p.ckpt_lp_gscale = static_cast<float*>(opt("ckpt_lp_gscale"));
    if (mamba) {
        p.A = static_cast<float const*>(opt("A"));
        p.ring_dt = static_cast<float const*>(opt("ring_dt"));
        p.ring_x = opt("ring_x");
        p.ring_B = opt("ring_B");
    } else {
        p.ring_g = static_cast<float const*>(opt("ring_g"));
        p.ring_k = opt("ring_k");
        p.ring_beta = static_cast<float const*>(opt("ring_beta"));
        p.ring_v = opt("ring_v");
    }
    TensorDesc const& fl = out[kOUT_FLUSHED];
    if (fl.dtype != DType::kINT32 || fl.nbDims != 1)
        throw Error("DualPrecisionFlush: output 0 'flushed' must be int32 [B]; got " + std::string(dtypeName(fl.dtype)));
    p.flushed = static_cast<int32_t*>(mut(fl));
    return p;
}

namespace {
struct Desc {
    std::ostringstream os;
    void const* base;
    template <typename T> void v(char const* n, T x) { os << n << "=" << +x << "\n"; }
    void ptr(char const* n, void const* x) {
        if (x == nullptr) os << n << "=null\n";
        else if (base) os << n << "=+" << (static_cast<char const*>(x) - static_cast<char const*>(base)) << "\n";
        else os << n << "=" << x << "\n";
    }
};
}  // namespace

#define RSSM_V(f) d.v(#f, p.f)
#define RSSM_P(f) d.ptr(#f, p.f)

std::string describe(Mamba2ReplayParams const& p, void const* base) {
    Desc d{{}, base};
    RSSM_V(batch); RSSM_V(num_tokens); RSSM_V(nheads); RSSM_V(headdim); RSSM_V(dstate); RSSM_V(ngroups);
    RSSM_V(num_slots); RSSM_V(window); RSSM_V(ring_capacity); RSSM_V(mode); RSSM_V(state_dtype); RSSM_V(act_dtype);
    RSSM_V(dt_dtype); RSSM_V(rows_per_cta); RSSM_V(variant);
    RSSM_V(stride_state_slot); RSSM_V(stride_state_head); RSSM_V(stride_state_p);
    RSSM_V(stride_x_b); RSSM_V(stride_x_t); RSSM_V(stride_x_h); RSSM_V(stride_dt_b); RSSM_V(stride_dt_t); RSSM_V(stride_dt_h);
    RSSM_V(stride_B_b); RSSM_V(stride_B_t); RSSM_V(stride_B_g); RSSM_V(stride_C_b); RSSM_V(stride_C_t); RSSM_V(stride_C_g);
    RSSM_V(stride_z_b); RSSM_V(stride_z_t); RSSM_V(stride_z_h); RSSM_V(stride_y_b); RSSM_V(stride_y_t); RSSM_V(stride_y_h);
    RSSM_P(state_batch_indices); RSSM_P(ring_origin); RSSM_P(ring_len); RSSM_P(state); RSSM_P(ring_dt); RSSM_P(ring_x);
    RSSM_P(ring_B); RSSM_P(x); RSSM_P(dt_raw); RSSM_P(Bm); RSSM_P(Cm); RSSM_P(z); RSSM_P(A); RSSM_P(D); RSSM_P(dt_bias); RSSM_P(y);
    return d.os.str();
}

std::string describe(GdnReplayParams const& p, void const* base) {
    Desc d{{}, base};
    RSSM_V(batch); RSSM_V(num_tokens); RSSM_V(num_heads); RSSM_V(num_v_heads); RSSM_V(head_k); RSSM_V(head_v);
    RSSM_V(num_slots); RSSM_V(window); RSSM_V(ring_capacity); RSSM_V(mode); RSSM_V(state_dtype); RSSM_V(act_dtype);
    RSSM_V(u_dtype); RSSM_V(rows_per_cta); RSSM_V(scale); RSSM_V(variant);
    RSSM_V(state_stride_slot); RSSM_V(state_stride_head); RSSM_V(state_stride_v);
    RSSM_V(q_stride_b); RSSM_V(q_stride_t); RSSM_V(q_stride_h); RSSM_V(k_stride_b); RSSM_V(k_stride_t); RSSM_V(k_stride_h);
    RSSM_V(v_stride_b); RSSM_V(v_stride_t); RSSM_V(v_stride_h); RSSM_V(a_stride_b); RSSM_V(a_stride_t);
    RSSM_V(b_stride_b); RSSM_V(b_stride_t); RSSM_V(o_stride_b); RSSM_V(o_stride_t); RSSM_V(o_stride_h);
    RSSM_V(ring_g_stride_slot); RSSM_V(ring_g_stride_rec); RSSM_V(ring_u_stride_slot); RSSM_V(ring_u_stride_rec);
    RSSM_V(ring_u_stride_head); RSSM_V(ring_k_stride_slot); RSSM_V(ring_k_stride_rec); RSSM_V(ring_k_stride_head);
    RSSM_P(state); RSSM_P(state_batch_indices); RSSM_P(ring_origin); RSSM_P(ring_len); RSSM_P(ring_g); RSSM_P(ring_u);
    RSSM_P(ring_k); RSSM_P(q); RSSM_P(k); RSSM_P(v); RSSM_P(a); RSSM_P(b); RSSM_P(A_log); RSSM_P(dt_bias); RSSM_P(o);
    return d.os.str();
}

std::string describe(ReplayCommitParams const& p, void const* base) {
    Desc d{{}, base};
    RSSM_V(batch); RSSM_V(num_slots); RSSM_V(window); RSSM_V(ring_capacity); RSSM_V(num_tokens); RSSM_V(mode);
    RSSM_P(state_batch_indices); RSSM_P(accepted); RSSM_P(ring_origin); RSSM_P(ring_len); RSSM_P(error_slot);
    return d.os.str();
}

std::string describe(DualPrecisionDecodeParams const& p, void const* base) {
    Desc d{{}, base};
    RSSM_V(family); RSSM_V(batch); RSSM_V(num_tokens); RSSM_V(num_slots); RSSM_V(window); RSSM_V(ring_capacity);
    RSSM_V(mode); RSSM_V(nheads); RSSM_V(headdim); RSSM_V(dstate); RSSM_V(ngroups); RSSM_V(act_dtype);
    RSSM_V(recurrence_dtype); RSSM_V(read_dtype); RSSM_V(dt_dtype); RSSM_V(scale);
    RSSM_V(stride_hp_slot); RSSM_V(stride_hp_head); RSSM_V(stride_hp_row); RSSM_V(stride_lp_slot); RSSM_V(stride_lp_head);
    RSSM_V(stride_lp_row);
    RSSM_P(state_batch_indices); RSSM_P(ring_origin); RSSM_P(ring_len); RSSM_P(ckpt_hp); RSSM_P(ckpt_hp_scale);
    RSSM_P(ckpt_lp); RSSM_P(ckpt_lp_scale); RSSM_P(ckpt_lp_gscale);
    RSSM_P(x); RSSM_P(dt_raw); RSSM_P(Bm); RSSM_P(Cm); RSSM_P(z); RSSM_P(A); RSSM_P(D); RSSM_P(dt_bias); RSSM_P(ring_dt);
    RSSM_P(ring_x); RSSM_P(ring_B); RSSM_P(y);
    RSSM_P(q); RSSM_P(k); RSSM_P(v); RSSM_P(a); RSSM_P(b); RSSM_P(A_log); RSSM_P(gdn_dt_bias); RSSM_P(ring_g);
    RSSM_P(ring_u); RSSM_P(ring_k); RSSM_P(ring_beta); RSSM_P(ring_v); RSSM_P(o);
    return d.os.str();
}

std::string describe(DualPrecisionFlushParams const& p, void const* base) {
    Desc d{{}, base};
    RSSM_V(family); RSSM_V(batch); RSSM_V(num_tokens); RSSM_V(num_slots); RSSM_V(window); RSSM_V(ring_capacity);
    RSSM_V(mode); RSSM_V(nheads); RSSM_V(headdim); RSSM_V(dstate); RSSM_V(ngroups); RSSM_V(act_dtype);
    RSSM_V(recurrence_dtype); RSSM_V(read_dtype); RSSM_V(rounding); RSSM_V(layer_index); RSSM_V(seed_lo); RSSM_V(seed_hi);
    RSSM_V(stride_hp_slot); RSSM_V(stride_hp_head); RSSM_V(stride_hp_row); RSSM_V(stride_lp_slot); RSSM_V(stride_lp_head);
    RSSM_V(stride_lp_row);
    RSSM_P(state_batch_indices); RSSM_P(ring_origin); RSSM_P(ring_len); RSSM_P(flush_index); RSSM_P(ckpt_hp);
    RSSM_P(ckpt_hp_scale); RSSM_P(ckpt_lp); RSSM_P(ckpt_lp_scale); RSSM_P(ckpt_lp_gscale); RSSM_P(A); RSSM_P(ring_dt);
    RSSM_P(ring_x); RSSM_P(ring_B); RSSM_P(ring_g); RSSM_P(ring_k); RSSM_P(ring_beta); RSSM_P(ring_v); RSSM_P(flushed);
    return d.os.str();
}

}  // namespace core
}  // namespace rssm
