"""Model files from outside (`--from-gguf`): wrong values, damaged headers, hostile counts and
files that are not files each end in one line naming the file and the key, exit 2, in bounded
memory and time (issue 43, items 8-11 and 15). Valid-but-wrong files are written with
gguf's GGUFWriter, damaged headers as raw bytes; the memory bounds run in a child under
RLIMIT_AS, so that a regression fails instead of eating the machine."""
import math
import os
import struct
import subprocess
import sys

import pytest

from _gguf_models import _common, _dense_layer, write_model
from cannops.cases.from_model import derive, read_gguf

OPS = [sys.executable, "-m", "cannops.cli.main"]
KEYS = {"embedding_length": 64, "block_count": 1, "attention.head_count": 2, "attention.head_count_kv": 1,
        "attention.layer_norm_rms_epsilon": 1e-5}


def _tensors():
    t = _common(64, 128, emb="f32", out="f32")
    t.update(_dense_layer(0, 64, 64, 32, 128, wt="f32", down="f32"))
    return t


def _model(tmp_path, keys=None, drop=(), arch="llama", **tensors):
    """A one-layer llama with `keys` on top of KEYS (None: removed) and `tensors` {name: (ne, type)}."""
    k = {**KEYS, **(keys or {})}
    t = {**_tensors(), **{n.replace("__", "."): v for n, v in tensors.items()}}
    for name in drop:
        t.pop(name, None)
    return write_model(tmp_path / "m.gguf", arch, {n: v for n, v in k.items() if v is not None}, t)


def test_the_valid_model_derives(tmp_path):
    assert len(derive(read_gguf(_model(tmp_path)), [1, 8], 256)) > 10


EXPERTS = {"blk__0__ffn_up_exps__weight": ((64, 32, 4), "f32"), "blk__0__ffn_gate_inp__weight": ((64, 4), "f32")}

# (what, keys, tensors, the key or tensor the error names)
BAD_VALUES = [
    ("head_count 0", {"attention.head_count": 0}, {}, "llama.attention.head_count: 0 is out of range"),
    ("head_count_kv 0", {"attention.head_count_kv": 0}, {}, "llama.attention.head_count_kv: 0 is out of range"),
    ("head_count_kv not a divisor", {"attention.head_count": 3, "attention.head_count_kv": 2}, {},
     "llama.attention.head_count_kv: 2 does not divide"),
    ("YaRN factor inf", {"rope.scaling.type": "yarn", "rope.scaling.factor": math.inf}, {},
     "llama.rope.scaling.factor: inf is not a finite number"),
    ("YaRN factor NaN", {"rope.scaling.type": "yarn", "rope.scaling.factor": math.nan}, {},
     "llama.rope.scaling.factor: nan is not a finite number"),
    ("YaRN factor negative", {"rope.scaling.type": "yarn", "rope.scaling.factor": -4.0}, {},
     "llama.rope.scaling.factor: -4 is not a finite number"),
    ("eps NaN", {"attention.layer_norm_rms_epsilon": math.nan}, {}, "layer_norm_rms_epsilon: nan is not a finite"),
    ("eps negative", {"attention.layer_norm_rms_epsilon": -1e-5}, {}, "layer_norm_rms_epsilon: -1e-05 is not a finite"),
    ("an array for a count", {"attention.head_count": [2, 2]}, {}, "attention.head_count: an array where an integer"),
    ("an array for a float", {"attention.layer_norm_rms_epsilon": [1e-5]}, {}, "an array where a number belongs"),
    ("a boolean embedding_length", {"embedding_length": True}, {}, "embedding_length: a boolean where an integer"),
    ("a string for a count", {"block_count": "2"}, {}, "llama.block_count: a string where an integer"),
    ("experts without expert_count", {}, EXPERTS, "llama.expert_count: missing"),
    ("more experts used than there are", {"expert_count": 4, "expert_used_count": 5}, EXPERTS,
     "llama.expert_used_count: 5 is more than expert_count 4"),
    ("1-d token_embd", {}, {"token_embd__weight": ((64,), "f32")}, "tensor token_embd.weight: 1-d"),
    ("0-d token_embd", {}, {"token_embd__weight": ((), "f32")}, "tensor token_embd.weight: 0-d"),
    ("1-d ffn_up", {}, {"blk__0__ffn_up__weight": ((64,), "f32")}, "tensor blk.0.ffn_up.weight: 1-d"),
    ("2-d ffn_up_exps", {"expert_count": 4, "expert_used_count": 2},
     {"blk__0__ffn_up_exps__weight": ((64, 32), "f32")}, "tensor blk.0.ffn_up_exps.weight: 2-d"),
    ("more heads than embeddings", {"attention.head_count": 128, "attention.head_count_kv": 128}, {},
     "llama.attention.head_count: 128 heads of embedding_length 64 leave no head size"),
    ("rope dims past the head", {"rope.dimension_count": 64}, {}, "rope.dimension_count: 64 is more than the head"),
    ("a dim past any model", {"embedding_length": 1 << 30}, {}, "embedding_length: 1073741824 is out of range"),
]


@pytest.mark.parametrize("what,keys,tensors,names", BAD_VALUES, ids=[b[0] for b in BAD_VALUES])
def test_a_wrong_value_is_one_error_naming_the_file_and_key(tmp_path, what, keys, tensors, names):
    path = _model(tmp_path, keys, **tensors)
    with pytest.raises(ValueError) as e:
        derive(read_gguf(path), [1, 8], 256)
    assert str(e.value).startswith(path + ": ") and names in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("command", [["cases"], ["support", "-b", "NUMPY"]])
def test_cases_and_support_exit_2_on_a_wrong_value(tmp_path, command):
    path = _model(tmp_path, {"attention.head_count_kv": 0})
    r = subprocess.run([*OPS, *command, "--from-gguf", path], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "head_count_kv: 0 is out of range" in r.stderr, \
        r.stderr[-2000:]


def test_an_architecture_name_reaches_the_terminal_escaped(tmp_path):
    path = _model(tmp_path, arch="llama\n\x1b[31mred\x1b]0;title\x07")
    r = subprocess.run([*OPS, "cases", "--from-gguf", path], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr and "\\x1b[31mred" in r.stderr


# --- damaged headers: raw bytes -------------------------------------------------------------

def _header(n_tensors, n_keys, body=b""):
    return b"GGUF" + struct.pack("<IQQ", 3, n_tensors, n_keys) + body


def _key(name, vtype):
    return struct.pack("<Q", len(name)) + name + struct.pack("<I", vtype)


U8_ARRAY_2_40 = _header(0, 2, _key(b"general.architecture", 8) + struct.pack("<Q", 5) + b"llama" + _key(b"a", 9)
                        + struct.pack("<IQ", 0, 1 << 40))
DAMAGED = {
    "the magic alone": (b"GGUF", "the version needs 4 bytes"),
    "not a GGUF": (b"\x7fELF" + bytes(60), "no GGUF magic"),
    "version 1": (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "GGUF version 1"),
    "a key length of 2^62": (_header(0, 1, struct.pack("<Q", 1 << 62) + b"x" * 16), "a count of 4,611,686,018,427,387,904"),
    "a key name of 2000 bytes": (_header(0, 1, struct.pack("<Q", 2000) + b"k" * 2000 + bytes(16)),
                                 "key #0's name: a count of 2,000, more than the 1,024 read"),
    "a string of 2^62": (_header(0, 1, _key(b"k", 8) + struct.pack("<Q", 1 << 62)), "key 'k'"),
    "an array count of 2^62": (_header(0, 1, _key(b"k", 9) + struct.pack("<IQ", 6, 1 << 62)), "key 'k''s array"),
    "a u8 array of 2^40 (169 bytes)": (U8_ARRAY_2_40 + bytes(169 - len(U8_ARRAY_2_40)), "key 'a''s array"),
    "strings of 2^20 in 64 bytes": (_header(0, 1, _key(b"k", 9) + struct.pack("<IQ", 8, 1 << 20)) + bytes(24),
                                    "1,048,576 of at least 8 bytes"),
    "a tensor count of 2^40": (_header(1 << 40, 0), "a header of 1,099,511,627,776 tensors"),
    "a key count of 2^40": (_header(0, 1 << 40), "a header of 1,099,511,627,776 keys"),
    "a key count past the file": (_header(0, 1000), "1,000 keys and 0 tensor infos needs"),
    "an array of arrays": (_header(0, 1, _key(b"k", 9) + struct.pack("<IQ", 9, 1)), "an array of array"),
    "5 dims": (_header(1, 0, struct.pack("<Q", 1) + b"t" + struct.pack("<I", 5) + bytes(64)), "5 dims"),
    "2^64 elements": (_header(1, 0, struct.pack("<Q", 1) + b"t" + struct.pack("<IQQ", 2, 1 << 40, 1 << 40) + bytes(12)),
                      "more than 2^63 elements"),
}


def _read_in_child(path, limit_mb=1024, timeout=60):
    """read_gguf(path) in a child under RLIMIT_AS (limit_mb) with a time limit: (error line,
    peak RSS growth in MB during the read)."""
    code = (f"import resource, sys\nresource.setrlimit(resource.RLIMIT_AS, ({limit_mb} << 20, {limit_mb} << 20))\n"
            "from cannops.cases.from_model import read_gguf\n"
            "import gguf\n"   # what the reader imports, before the baseline
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "try:\n    read_gguf(sys.argv[1]); err = 'read'\nexcept ValueError as e:\n    err = str(e)\n"
            "print(err); print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)\n")
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=timeout,
                       env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    err, grew = r.stdout.splitlines()
    return err, int(grew)


@pytest.mark.parametrize("what", list(DAMAGED))
def test_a_damaged_header_is_one_error_in_bounded_memory(tmp_path, what):
    data, says = DAMAGED[what]
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    err, grew = _read_in_child(path)
    assert err.startswith(f"{path}: ") and says in err and "\n" not in err, err
    assert grew < 16, f"{what}: the read grew {grew} MB"


def _vocab_file(path, n):
    """A GGUF of general.architecture and a vocabulary of n strings (raw bytes: GGUFWriter
    takes seconds per 100k)."""
    body = _key(b"general.architecture", 8) + struct.pack("<Q", 5) + b"llama"
    body += _key(b"tokenizer.ggml.tokens", 9) + struct.pack("<IQ", 8, n)
    token = struct.pack("<Q", 6) + b"token_"
    path.write_bytes(_header(0, 2, body) + token * n)
    return path


def test_a_vocabulary_is_walked_in_bounded_memory(tmp_path):
    """300k strings took 450 MB through gguf's GGUFReader; walked, the read keeps none."""
    err, grew = _read_in_child(_vocab_file(tmp_path / "v.gguf", 300_000), limit_mb=1024)
    assert "no token_embd" not in err and grew < 16, (err, grew)


@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("command", [["cases", "--from-gguf"], ["test", "-b", "NUMPY", "--cases"]])
def test_a_file_that_is_not_regular_is_refused_without_waiting(tmp_path, kind, command):
    path = tmp_path / "x"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    r = subprocess.run([*OPS, *command, str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"is a {kind if kind == 'directory' else 'FIFO'}, not a regular file" in r.stderr, r.stderr


@pytest.mark.parametrize("endianess", ["LITTLE", "BIG"])
def test_the_bounded_reader_reads_what_gguf_reads(tmp_path, endianess):
    """Keys, values and tensor infos as gguf's GGUFReader gives them (which maps everything)."""
    import gguf
    from cannops.cases.gguf_header import Skipped, read_header
    w = gguf.GGUFWriter(str(tmp_path / "m.gguf"), "llama", endianess=gguf.GGUFEndian[endianess])
    w.add_uint32("llama.block_count", 2)
    w.add_float32("llama.rope.scaling.factor", 0.25)
    w.add_bool("llama.flag", True)
    w.add_int64("llama.big", -(1 << 40))
    w.add_array("llama.attention.head_count", [4, 8])
    w.add_array("tokenizer.ggml.tokens", [f"t{i}" for i in range(2000)])
    w.add_string("tokenizer.chat_template", "x" * 70000)
    w.add_tensor("blk.0.ffn_up.weight", gguf.np.zeros((3, 4, 5), gguf.np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    path = str(tmp_path / "m.gguf")
    keys, tensors = read_header(path)
    ref = gguf.GGUFReader(path, "r")
    for name, field in ref.fields.items():
        if not name.startswith("GGUF."):
            mine = keys.pop(name)
            assert isinstance(mine, Skipped) or mine == field.contents(), name
    assert keys == {} and isinstance(read_header(path)[0]["tokenizer.ggml.tokens"], Skipped)
    assert [(t.name, t.type, t.ne) for t in tensors] == \
        [(t.name, int(t.tensor_type), tuple(int(x) for x in t.shape)) for t in ref.tensors]


def test_the_strings_kept_are_bounded_over_the_file(tmp_path):
    """100 strings of 60 KB: each under the 64 KiB kept, together past the 4 MiB kept in all."""
    from cannops.cases.gguf_header import KEEP_BYTES, Skipped, read_header
    body = b"".join(_key(f"k{i}".encode(), 8) + struct.pack("<Q", 60000) + b"v" * 60000 for i in range(100))
    (tmp_path / "s.gguf").write_bytes(_header(0, 100, body))
    keys, _ = read_header(str(tmp_path / "s.gguf"))
    kept = [v for v in keys.values() if isinstance(v, str)]
    assert len(keys) == 100 and sum(map(len, kept)) <= KEEP_BYTES < 100 * 60000
    assert all(isinstance(keys[f"k{i}"], Skipped) for i in range(len(kept), 100))
