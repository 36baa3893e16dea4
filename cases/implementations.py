"""What computes a case, as the catalog's notes (Deviation) and tolerances (Tolerance) name
it: an implementation, never a device. A device says which implementations it runs
(backend.base.Device.implements), so that one note covers every device running the same
code (an NPU and the simulator) and no family names a device."""
ACLNN = "aclnn"              # ops' native aclnn layer (native/aclnn), on any CANN device: NPU or CANN-SIM
ACLNN_310P = "aclnn:310P"    # the same layer on a 310P SoC (its ASCEND_310P branches, its cube)
GGML_CPU = "ggml-cpu"        # ggml's CPU backend, through the bridge
ALL = (ACLNN, ACLNN_310P, GGML_CPU)
