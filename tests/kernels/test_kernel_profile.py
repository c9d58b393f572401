"""The demangled-name parser of tests/kernels/kernel_profile.py (CPU): the GPU tests that check which kernel instance a
launcher chose rely on it, so it is checked on both spellings the demangler uses for template arguments."""
from kernel_profile import instances, template_args


def test_plain_and_cast_spellings_normalize_alike():
    a = template_args("void rssm::gdn::gdnSplitReadoutKernel<float, 128, 1, 128, 5, 1, 1, true, false>"
                      "(GdnReplayParams, rssm::stream::ReadCopyScales)", "gdnSplitReadoutKernel")
    b = template_args("void rssm::gdn::gdnSplitReadoutKernel<float, (int)128, (int)1, (int)128, (int)5, (int)1, (int)1,"
                      " (bool)1, (bool)0>(GdnReplayParams, rssm::stream::ReadCopyScales)", "gdnSplitReadoutKernel")
    assert a == b == ["float", "128", "1", "128", "5", "1", "1", "1", "0"]


def test_nested_template_argument_is_one_argument():
    a = template_args("void rssm::gdn::gdnSplitReadoutKernel<rssm::stream::Fp8Rows<1>, 128, 1, 128, 5, 0, 0>(P)",
                      "gdnSplitReadoutKernel")
    assert a == ["rssm::stream::Fp8Rows<1>", "128", "1", "128", "5", "0", "0"]


def test_other_kernels_are_ignored():
    names = {"void rssm::gdn::gdnSplitPrepKernel<128, 1, 8>(GdnReplayParams, int)",
             "void rssm::gdn::gdnSplitVerifyMmaKernel<float, 8, 2, true, false>(GdnReplayParams)"}
    assert template_args("void rssm::gdn::gdnSplitPrepKernel<128, 1, 8>(GdnReplayParams, int)",
                         "gdnSplitVerifyMmaKernel") is None
    assert instances(names, "gdnSplitVerifyMmaKernel") == [["float", "8", "2", "1", "0"]]
