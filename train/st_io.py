"""Safetensors reading/writing (the plain format, no package needed) and MXFP4 packing.

Only numpy is needed. Dtypes used by K3 checkpoints: BF16, F32, U8.
"""
import json
import struct

import numpy as np

# ---------------------------------------------------------------- bf16 <-> f32


def f32_to_bf16_bits(a):
    """Round-to-nearest-even float32 -> bfloat16, returned as uint16 bits."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    rounding = ((u >> 16) & 1) + 0x7FFF
    out = ((u + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def bf16_bits_to_f32(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def round_bf16(a):
    return bf16_bits_to_f32(f32_to_bf16_bits(a)).reshape(np.shape(a))


# ---------------------------------------------------------------- safetensors


def read_header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    return n, header


def read_safetensors(path):
    """Returns {name: (dtype_str, shape, raw numpy array in the stored dtype)}."""
    n, header = read_header(path)
    data = np.fromfile(path, dtype=np.uint8, offset=8 + n)
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        raw = data[a:b]
        dt = meta["dtype"]
        if dt == "BF16":
            arr = raw.view(np.uint16)
        elif dt == "F32":
            arr = raw.view(np.float32)
        elif dt == "U8":
            arr = raw
        elif dt == "I32":
            arr = raw.view(np.int32)
        else:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {dt}")
        out[name] = (dt, list(meta["shape"]), arr.reshape(meta["shape"]))
    return out


def write_safetensors(path, tensors):
    """tensors: {name: (dtype_str, numpy array already in that dtype)}.

    Tensors are laid out in sorted name order (as the usual writer does), each
    one aligned to 8 bytes by padding the header only (data is packed back to back,
    like the reference writer)."""
    names = sorted(tensors)
    header = {}
    off = 0
    blobs = []
    for name in names:
        dt, arr = tensors[name]
        arr = np.ascontiguousarray(arr)
        want = {"BF16": np.uint16, "F32": np.float32, "U8": np.uint8}[dt]
        if arr.dtype != want:
            raise ValueError(f"{name}: dtype {arr.dtype} does not match {dt}")
        b = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return off


def load_checkpoint(model_dir):
    """All tensors of an HF checkpoint directory (index + shards) as raw arrays."""
    with open(f"{model_dir}/model.safetensors.index.json") as f:
        idx = json.load(f)
    out = {}
    for shard in sorted(set(idx["weight_map"].values())):
        out.update(read_safetensors(f"{model_dir}/{shard}"))
    return out


# ---------------------------------------------------------------- MXFP4

E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)


def mxfp4_dequant(packed, scale):
    """packed U8 [R, C/2] (low nibble = even column), scale U8 [R, C/32] (E8M0)."""
    packed = np.asarray(packed, dtype=np.uint8)
    R = packed.shape[0]
    codes = np.empty((R, packed.shape[1] * 2), dtype=np.uint8)
    codes[:, 0::2] = packed & 0x0F
    codes[:, 1::2] = packed >> 4
    mag = E2M1_VALUES[codes & 7]
    val = np.where(codes & 8, -mag, mag).astype(np.float32)
    s = np.ldexp(np.float32(1.0), scale.astype(np.int32) - 127).astype(np.float32)
    return (val.reshape(R, -1, 32) * s[:, :, None]).reshape(R, -1)


def mxfp4_pack(codes, scale_exp):
    """codes uint8 [R, C] (4-bit E2M1 codes), scale_exp int [R, C/32] (unbiased exponent)."""
    codes = np.asarray(codes, dtype=np.uint8)
    packed = (codes[:, 0::2] & 0x0F) | ((codes[:, 1::2] & 0x0F) << 4)
    s = np.asarray(scale_exp, dtype=np.int32) + 127
    if s.min() < 1 or s.max() > 254:
        raise ValueError("MXFP4 scale exponent out of the E8M0 range used here")
    return packed.astype(np.uint8), s.astype(np.uint8)
