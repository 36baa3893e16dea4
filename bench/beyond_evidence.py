"""The evidence of each path of ops' CANN layer beyond ggml-cann (docs/beyond-ggml-cann.md):
per path (a rule of backend/cann/rules_*.py with a `beyond` note, keyed like RULES), the
aclnn calls its native handler makes and, per argument, what the layer passes, the page
row and the source line that allow it, and the decision where the page forbids it.

Pages and sources are of hicann's repositories, snapshot of 2026-08: M = ops-math, N =
ops-nn, C = ops-cv; `docs/aclnnX.md` is the page (its parameter table or 约束说明), `op_api`
the operator's check (aclnnXGetWorkspaceSize's CheckParams). "A2" is the page's column
or note for Atlas A2 / A3, the simulated 910B. Device runs are the Ascend CI's 910B
reports (shared/reference/ci-summary-example-b.md, ggml at a82d61d2), with the ggml-cann
call that made them.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arg:
    name: str      # the argument (or arguments)
    passes: str    # what the layer passes
    page: str      # the page row about it
    source: str    # the source line about it


@dataclass(frozen=True)
class Call:
    operator: str               # aclnn<operator>
    page: str
    source: str
    args: tuple[Arg, ...]


@dataclass(frozen=True)
class Path:
    title: str                  # what goes beyond ggml-cann
    calls: tuple[Call, ...]
    device: str                 # a device run of the same operator and mode, or none
    decision: str               # what the layer does, and why, where page and source differ


def _f32(page: str, source: str, name: str = "self, out") -> Arg:
    return Arg(name, "FLOAT, ND", page, source)


CONV = Call(
    "Convolution", "N conv/convolution_forward/docs/aclnnConvolution.md",
    "N conv/convolution_forward/op_host/op_api/aclnn_convolution.cpp",
    (Arg("input, output", "FLOAT, NCHW, 4-D", "parameter table: FLOAT FLOAT16 BFLOAT16; NCL NCHW NCDHW; output "
         "= the deduced type", "DtypeChecker, FormatChecker"),
     Arg("weight", "FLOAT or FLOAT16 (ggml's f16 kernels), NCHW", "deduction with input (f16 + f32 → f32, "
         "docs/zh/context/deduction_relationship.md)", "GetConvolutionOpDtype: the promoted type, both cast to it"),
     Arg("bias", "nullptr", "无bias场景，可传入nullptr", "NullptrChecker leaves bias optional"),
     Arg("stride, padding, dilation", "2 values each; padding in [0, 255] (the rule's check)",
         "约束说明, A2: conv2d forward padding in [0, 255]; stride, dilation > 0",
         "ValueChecker: CheckVectorValueGt0, CheckPad"),
     Arg("transposed, outputPadding", "false, [0, 0]", "outputPadding ignored when not transposed", "—"),
     Arg("groups", "1 (CONV_2D) or the channels (CONV_2D_DW)", "[1, 65535], groups · weight C = input C",
         "ValueChecker (groups > 0, channels and groups)"),
     Arg("cubeMathType", "0 (KEEP_DTYPE) on the 910B (1 on the 310P)",
         "**约束说明, A2 column: 为0（KEEP_DTYPE）时，当输入是FLOAT暂不支持** (forbids it)",
         "HardwareLimitChecker → CheckCubeMathType (N matmul/common/op_host/op_api/cube_util.cpp): "
         "KEEP_DTYPE refuses FLOAT only where the cube has no f32 (CheckSocSupportDtype, IsCubeSupportFp32)")))
CONV_DEVICE = ("ggml-cann's SSM_CONV (aclnnConvolution forward, f32, groups = channels, cubeMathType 0: "
               "aclnn_ops.cpp ggml_cann_ssm_conv) and CONV_TRANSPOSE_1D (transposed, f32, cubeMathType 0) "
               "are ✅ on the 910B CI")
CONV_DECISION = ("the page forbids KEEP_DTYPE for FLOAT on A2; the source and a device run of the same "
                 "operator, mode and dtype (SSM_CONV) take it: KEEP_DTYPE kept (exact f32, as ggml-cann's "
                 "convolutions); the simulator takes it too (cube.py FLOAT_INPUTS)")

POOL_PAD = Call(
    "ConstantPadNd", "M conversion/pad_v3/docs/aclnnConstantPadNd.md", "M conversion/pad_v3/op_api/aclnn_constant_pad_nd.cpp",
    (_f32("self, out: FLOAT among the A2 types; ND", "DTYPE_SUPPORT_910B_LIST, Checkformat"),
     Arg("pad", "8 values, last dim first (the row's two sides)", "length even, at most 2 · dims",
         "CheckShape"),
     Arg("value", "FLOAT scalar -FLT_MAX", "value: not documented beyond its type", "CheckPadForFp")))
MAX_POOL = Call(
    "MaxPool", "N pooling/max_pool_v3/docs/aclnnMaxPool.md", "N pooling/max_pool_v3/op_api/aclnn_max_pool.cpp",
    (Arg("self, out", "FLOAT, ND, 4-D", "FLOAT16 FLOAT (A2 note: no BF16, integers); ND; 3-4 dims",
         "SELF_OUT_DTYPE_SUPPORT_910B_LIST, CheckFormat"),
     Arg("kernelShape, strides", "2 values > 0 (1 row)", "length 1 or 2, > 0", "CheckParamsLogic"),
     Arg("autoPad, pads, dilations, ceilMode", "0, [0, 0, 0, 0], [1, 1], 0", "autoPad 0 only; pads length "
         "0/1/2/4; dilations 1 only", "CheckDilationsValue")))
AVG_POOL = Call(
    "AvgPool2d", "N pooling/avg_pool3_d/docs/aclnnAvgPool2d.md", "N pooling/avg_pool3_d/op_api/aclnn_avgpool2d.cpp",
    (Arg("self, out", "FLOAT, NCHW", "FLOAT32 FLOAT16 BFLOAT16; NCHW NCL", "CheckDtypeValid, CheckFormat"),
     Arg("kernelSize, strides, paddings", "(1, k), (1, s), (0, p)", "kernelSize length 1 or 2, > 0; strides > 0; paddings length 1 or 2, ≥ 0",
         "CheckPaddingValid"),
     Arg("ceilMode, countIncludePad, divisorOverride", "false, **false** (ggml's 1-D average over the values "
         "inside the row), 0", "booleans; divisorOverride 0 = none", "CheckParams"),
     Arg("cubeMathType", "0 (KEEP_DTYPE)", "A2: 0 keeps the type; 1 is refused for FLOAT32 on A2",
         "CheckParams (cubeMathType)")))


EVIDENCE: dict[str, Path] = {
    "CONV_2D": Path("every case (ggml-cann has no CONV_2D)", (CONV,), CONV_DEVICE, CONV_DECISION),
    "CONV_2D_DW": Path("every case (ggml-cann has no CONV_2D_DW): groups = channels", (CONV,), CONV_DEVICE,
                       CONV_DECISION),
    "POOL_1D": Path(
        "every case (ggml-cann has no POOL_1D): POOL_2D's operators over 1-row images",
        (POOL_PAD, MAX_POOL, AVG_POOL),
        "ggml-cann's POOL_2D (max: ConstantPadNd + MaxPool; average: AvgPool2d, cubeMathType 0, f32) is 🟡 "
        "on the 910B CI (its supported cases pass)",
        "page and source agree; countIncludePad false is the one argument ggml-cann's POOL_2D never passes "
        "(a documented boolean)"),
    "ADD_ID": Path(
        "every case (ggml-cann has no ADD_ID), and MUL_MAT_VEC_FUSION with a bias (its ADD_ID node)",
        (Call("GatherV2", "N index/gather_v2/docs/aclnnGatherV2.md", "N index/gather_v2/op_api/aclnn_gather_v2.cpp",
              (_f32("self, out: FLOAT among the A2 types; ND", "DTYPE_SUPPORT_LIST_WITH_BF16 (A2)"),
               Arg("dim, index", "0; INT32 ids, 2-D", "dim in [-n, n - 1]; index INT32 INT64", "INDEX_SUPPORT_LIST, "
                   "CheckShape"))),
         Call("Add", "M math/add/docs/aclnnAdd&aclnnInplaceAdd.md", "M math/add/op_api/aclnn_add.cpp",
              (_f32("self, other, out: FLOAT; broadcast", "ASCEND910B_DTYPE_SUPPORT_LIST"),
               Arg("alpha", "FLOAT 1.0", "alpha: cast to the promoted type", "CheckPromoteType")))),
        "ggml-cann's ADD (aclnnAdd, f32) is ✅ on the 910B CI; GatherV2 of f32 rows: none (ggml 0.9.5 "
        "gathers with aclnnIndexSelect)",
        "page and source agree"),
    "REPEAT_BACK": Path(
        "every case (ggml-cann has no REPEAT_BACK): one sum over the repeats",
        (Call("ReduceSum", "M math/reduce_sum/docs/aclnnReduceSum.md", "M math/reduce_sum/op_api/aclnn_reduce_sum.cpp",
              (_f32("self, out, dtype: FLOAT among the A2 types", "ASCEND910B_DTYPE_SUPPORT_LIST, CheckDtypeValid"),
               Arg("dims, keepDim", "the repeat axes of an 8-D view, false", "dims in [-n, n - 1]; self 0-8 dims", "CheckDimValid, CheckMaxDimension"))),),
        "ggml-cann's SUM_ROWS and CROSS_ENTROPY_LOSS (aclnnReduceSum, f32) are ✅ on the 910B CI",
        "page and source agree"),
    "PAD": Path(
        "circular padding (ggml-cann refuses it)",
        (Call("CircularPad2d", "M conversion/circular_pad/docs/aclnnCircularPad2d.md",
              "M conversion/circular_pad/op_host/op_api/circular_pad_common.h",
              (Arg("self, out", "FLOAT, ND, 4-D (dims 2-3 through a transposed view)", "FLOAT16 BFLOAT16 FLOAT32 "
                   "INT8 INT32; ND; 3-4 dims; 约束说明: out's last dim in (0, 24544) for FLOAT", "CheckDtypeValid, "
                   "CheckFormat, CheckShape"),
               Arg("padding", "4 values, each below the padded dim (the rule's check)", "length 4, the first two "
                   "below self's last dim, the last two below its second last", "CheckShape"))),),
        "none: ggml-cann never calls aclnnCircularPad2d",
        "page and source agree; the page's width limit is within the catalog's cases (513 at most)"),
    "GLU:SWIGLU_OAI": Path(
        "every case (ggml-cann has no SWIGLU_OAI)",
        (Call("Clamp", "M conversion/clip_by_value_v2/docs/aclnnClamp.md",
              "M conversion/clip_by_value_v2/op_api/aclnn_clamp.cpp",
              (_f32("self, out: FLOAT; bounds cast to self", "AICORE_DTYPE_SUPPORT_LIST, CheckSelfCanCastOut"),)),
         Call("Muls", "M math/muls/docs/aclnnMuls&aclnnInplaceMuls.md", "M math/mul/op_api/aclnn_mul.cpp",
              (_f32("self, out: FLOAT; other FLOAT scalar", "CheckMulsParams"),)),
         Call("InplaceSigmoid", "N activation/sigmoid/docs/aclnnSigmoid&aclnnInplaceSigmoid.md",
              "N activation/sigmoid/op_api/aclnn_sigmoid.cpp",
              (_f32("selfRef: FLOAT", "DTYPE_SUPPORT_LIST, CheckDtypeValid (Sigmoid's, with out = selfRef)",
                    "selfRef"),)),
         Call("Mul", "M math/mul/docs/aclnnMul&aclnnInplaceMul.md", "M math/mul/op_api/aclnn_mul.cpp",
              (_f32("self, other, out: FLOAT", "ASCEND910B_DTYPE_DTYPE_SUPPORT_LIST, CheckMulParams"),)),
         Call("InplaceAdds", "M math/add/docs/aclnnInplaceAdds.md", "M math/add/op_api/aclnn_add.cpp",
              (_f32("selfRef: FLOAT", "ASCEND910B_DTYPE_SUPPORT_LIST", "selfRef"),
               Arg("other, alpha", "FLOAT 1.0, 1.0", "other: 取值范围需大于0 (1.0 is)", "no range check"))),
         Call("InplaceMul", "M math/mul/docs/aclnnMul&aclnnInplaceMul.md", "M math/mul/op_api/aclnn_mul.cpp",
              (_f32("selfRef, other: FLOAT", "CheckInplaceMulDtype", "selfRef, other"),))),
        "each operator with f32 on the 910B CI: CLAMP (aclnnClamp), SCALE (aclnnMuls), SIGMOID (aclnnSigmoid, "
        "whose in-place form runs its checks and kernel), MUL, "
        "ROPE with YaRN (aclnnInplaceAdds), the GLUs (aclnnInplaceMul)",
        "page and source agree"),
    "GET_ROWS": Path(
        "i32 rows (ggml-cann gathers floats and q8_0 only)",
        (Call("GatherV2", "N index/gather_v2/docs/aclnnGatherV2.md", "N index/gather_v2/op_api/aclnn_gather_v2.cpp",
              (Arg("self, out", "INT32, ND", "INT32 among the A2 types", "DTYPE_SUPPORT_LIST_WITH_BF16 (A2)"),
               Arg("dim, index", "0; INT32 ids", "index INT32 INT64", "INDEX_SUPPORT_LIST"))),),
        "none for INT32 rows",
        "page and source agree"),
    "UPSCALE": Path(
        "bilinear (ggml-cann maps nearest only)",
        (Call("UpsampleBilinear2d", "C image/upsample_bilinear2d/docs/aclnnUpsampleBilinear2d.md",
              "C image/upsample_bilinear2d/op_host/op_api/aclnn_upsample_bilinear_2d.cpp",
              (Arg("self, out", "FLOAT, NCHW, 4-D", "FLOAT BFLOAT16 FLOAT16 (DOUBLE in NHWC only); NCHW NHWC",
                   "AICORE_DTYPE_SUPPORT_LIST_FOR_AICORE, CheckFormat"),
               Arg("outputSize, alignCorners, scalesH, scalesW", "dst's (H, W); ggml's flag; dst / src",
                   "约束说明: outputSize = floor(self · scales)", "CheckOutputSize, CheckScalesAndShapeValid"))),),
        "none: ggml-cann never calls aclnnUpsampleBilinear2d",
        "page and source agree"),
    "ROLL": Path(
        "every case (ggml-cann 0.25.3's supports_op refuses ROLL)",
        (Call("Roll", "M conversion/roll/docs/aclnnRoll.md", "M conversion/roll/op_api/aclnn_roll.cpp",
              (_f32("x, out: FLOAT among the A2 types", "ASCEND910B_DTYPE_DTYPE_SUPPORT_LIST"),
               Arg("shifts, dims", "4 each, dims distinct in [0, 4)", "shifts and dims of one length, dims in [-n, n - 1]",
                   "CheckArraySize, CheckDimsRange"))),),
        "none on the 910B: ggml-cann calls aclnnRoll in its 310P ROPE only",
        "page and source agree"),
    # no catalog case: ggml_cumsum / fill / tri / diag assert f32 in the catalog's ggml
    "CUMSUM": Path(
        "non-f32 sources (no catalog case)",
        (Call("Cumsum", "M math/cumsum/docs/aclnnCumsum.md", "M math/cumsum/op_api/aclnn_cumsum.cpp",
              (Arg("self, out, dtype", "the ggml type's aclDataType, dim 3", "the A2 list, cast self → dtype",
                   "ASCEND910B_DTYPE_SUPPORT_LIST, CheckDim"),)),),
        "ggml-cann's CUMSUM (f32) is not in the CI reports", "page and source agree"),
    "FILL": Path(
        "non-f32 destinations (no catalog case)",
        (Call("InplaceFillScalar", "M conversion/fill/docs/aclnnInplaceFillScalar.md",
              "M conversion/fill/op_api/aclnn_fill_scalar.cpp",
              (Arg("selfRef, value", "the ggml type's aclDataType; FLOAT scalar", "the A2 list; value cast to selfRef",
                   "DTYPE_SUPPORT_GE910B_LIST, CheckPromoteType"),)),),
        "ggml-cann's DIAG_MASK_INF (aclnnInplaceFillScalar, f32) is ✅ on the 910B CI", "page and source agree"),
    "TRI": Path(
        "non-f32 types (no catalog case)",
        (Call("Tril", "M conversion/tril/docs/aclnnTril&aclnnInplaceTril.md", "M conversion/tril/op_api/aclnn_tril.cpp",
              (Arg("self, out", "the ggml type's aclDataType", "the A2 list", "DTYPE_SUPPORT_LIST_910B"),)),
         Call("Triu", "M conversion/triu/docs/aclnnTriu&aclnnInplaceTriu.md", "M conversion/triu/op_api/aclnn_triu.cpp",
              (Arg("self, out", "the ggml type's aclDataType", "the A2 list", "DTYPE_SUPPORT_LIST_910B"),))),
        "ggml-cann's DIAG_MASK_INF (aclnnTril, f32) is ✅ on the 910B CI", "page and source agree"),
    "DIAG": Path(
        "non-f32 types (no catalog case)",
        (Call("InplaceFillScalar", "M conversion/fill/docs/aclnnInplaceFillScalar.md",
              "M conversion/fill/op_api/aclnn_fill_scalar.cpp",
              (Arg("selfRef", "the ggml type's aclDataType, value 0", "the A2 list", "DTYPE_SUPPORT_GE910B_LIST"),)),
         Call("InplaceCopy", "M conversion/view_copy/docs/aclnnInplaceCopy.md", "M conversion/view_copy/op_api/aclnn_copy.cpp",
              (Arg("selfRef, src", "the ggml type's aclDataType; a strided diagonal view", "any listed type; "
                   "non-contiguous selfRef", "DTYPE_SUPPORT_LIST, CheckShape"),))),
        "ggml-cann's CPY / DUP (aclnnInplaceCopy) are ✅ on the 910B CI", "page and source agree"),
}


def path_of(graph, refusal: str) -> str:
    """The path of a case ops takes and ggml-cann refuses: the rule key of the node ggml-cann
    refused ("OP (node #i LABEL)", backend/ggml's reason)."""
    for node in graph.nodes():
        if f"(node #{node.index} " in refusal:
            return node.op_key
    return refusal.split(" ")[0]
