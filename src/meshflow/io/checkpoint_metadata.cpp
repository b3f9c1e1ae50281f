#include "meshflow/io/checkpoint_metadata.h"

#include <zlib.h>

#include <limits>
#include <nlohmann/json.hpp>

#include "meshflow/core/error.h"
#include "meshflow/io/safetensors_header.h"

namespace mf::io {

using json = nlohmann::ordered_json;

namespace {

// JSON integers read exactly: a float, or an integer outside the type, is an error (nlohmann's
// get<> would convert a float by an undefined cast, an unsigned above INT64_MAX by wrapping).
int64_t int_of(const json& j, const std::string& what) {
  MF_CHECK(j.is_number_integer() && !(j.is_number_unsigned() && j.get<uint64_t>() > uint64_t{INT64_MAX}), what,
           " is ", j.dump(), ", not an integer");
  return j.get<int64_t>();
}
uint64_t uint_of(const json& j, const std::string& what) {
  MF_CHECK(j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0), what, " is ", j.dump(),
           ", not a non-negative integer");
  return j.get<uint64_t>();
}

// Elements of `s`, every size non-negative and the product of the non-zero sizes (the largest
// any sub-product can be) times `elem_bytes` inside int64.
int64_t checked_numel(const Shape& s, int64_t elem_bytes, const std::string& what) {
  int64_t nonzero = elem_bytes, numel = 1;
  for (int64_t d : s) {
    MF_CHECK(d >= 0, what, ": shape ", shape_str(s), " has a negative size");
    if (d == 0) {
      numel = 0;
      continue;
    }
    MF_CHECK(nonzero <= std::numeric_limits<int64_t>::max() / d, what, ": shape ", shape_str(s), " is too large");
    nonzero *= d;
    numel *= d;
  }
  return numel;
}

Shape shape_of(const json& j, const std::string& what) {
  MF_CHECK(j.is_array(), what, " is not an array");
  Shape s;
  for (const json& d : j) s.push_back(int_of(d, what));
  return s;
}

}  // namespace

int64_t TensorRegion::box_numel() const {
  const RegionGeometry g = region_geometry(*this);
  return g.outer * g.seg_len;
}

TensorRegion TensorRegion::whole(const Shape& shape) {
  TensorRegion r;
  r.view = shape;
  return r;
}

RegionGeometry region_geometry(const TensorRegion& r) {
  const int64_t numel = shape_numel(r.view);
  if (r.axis < 0) return {numel, 0, numel, 1};
  int64_t inner = 1, outer = 1;
  for (size_t k = 0; k < r.view.size(); ++k) {
    if (static_cast<int64_t>(k) < r.axis) outer *= r.view[k];
    if (static_cast<int64_t>(k) > r.axis) inner *= r.view[k];
  }
  return {r.view[static_cast<size_t>(r.axis)] * inner, r.start * inner, r.length * inner, outer};
}

void check_region(const TensorRegion& r, const Shape& logical, const std::string& what) {
  // Sizes first, so that the products below cannot overflow.
  const int64_t numel = checked_numel(logical, 1, what);
  MF_CHECK(checked_numel(r.view, 1, what + ": region view") == numel, what, ": region view ", shape_str(r.view),
           " is not a view of the tensor's shape ", shape_str(logical));
  MF_CHECK(r.axis >= -1 && r.axis < static_cast<int64_t>(r.view.size()), what, ": region axis ", r.axis,
           " outside view ", shape_str(r.view));
  if (r.axis >= 0) {
    const int64_t n = r.view[static_cast<size_t>(r.axis)];
    MF_CHECK(r.start >= 0 && r.length >= 0 && r.start <= n && r.length <= n - r.start, what, ": region [", r.start,
             ", +", r.length, ") outside axis ", r.axis, " of ", shape_str(r.view));
  }
  const int64_t box = r.box_numel();
  MF_CHECK(r.flat_start >= 0 && r.flat_start <= box && (r.flat_length < 0 || r.flat_length <= box - r.flat_start),
           what, ": flat range [", r.flat_start, ", +", r.flat_length, ") outside the box of ", box, " elements");
}

json region_json(const TensorRegion& r) {
  return {{"view", r.view},           {"axis", r.axis},           {"start", r.start},
          {"length", r.length},       {"flat_start", r.flat_start}, {"flat_length", r.numel()}};
}

TensorRegion region_from_json(const json& j) {
  TensorRegion r;
  r.view = shape_of(j.at("view"), "region view");
  r.axis = int_of(j.at("axis"), "region axis");
  r.start = int_of(j.at("start"), "region start");
  r.length = int_of(j.at("length"), "region length");
  r.flat_start = int_of(j.at("flat_start"), "region flat_start");
  r.flat_length = int_of(j.at("flat_length"), "region flat_length");
  return r;
}

int64_t checkpoint_metadata_crc(const json& meta) {
  json rest = meta;
  rest.erase("metadata_crc32");
  const std::string text = rest.dump();
  return static_cast<int64_t>(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(text.data()), static_cast<uInt>(text.size())));
}

CheckpointMetadata parse_checkpoint_metadata(const std::string& text, const std::string& path) {
  CheckpointMetadata m;
  try {
    const json j = json::parse(text);
    MF_CHECK(j.is_object(), path, ": not a JSON object");
    const int64_t version = int_of(j.at("format_version"), path + ": format_version");
    MF_CHECK(version <= kCheckpointFormatVersion, path, ": checkpoint format version ", version,
             " is newer than this meshflow supports (", kCheckpointFormatVersion, ")");
    MF_CHECK(version == kCheckpointFormatVersion, path, ": checkpoint format version ", version,
             " is older than this meshflow reads (", kCheckpointFormatVersion, ")");
    if (j.contains("metadata_crc32"))
      MF_CHECK(int_of(j.at("metadata_crc32"), path + ": metadata_crc32") == checkpoint_metadata_crc(j), path,
               ": its checksum does not match its contents (edited or damaged)");
    m.state.iter = int_of(j.at("iter"), path + ": iter");
    m.state.optimizer_steps = int_of(j.at("optimizer_steps"), path + ": optimizer_steps");
    m.state.data_position = uint_of(j.at("data_position"), path + ": data_position");
    m.state.rng.seed = uint_of(j.at("rng").at("seed"), path + ": rng.seed");
    m.state.rng.next_stream = uint_of(j.at("rng").at("next_stream"), path + ": rng.next_stream");
    m.state.skipped_iters = j.contains("skipped_iters") ? int_of(j.at("skipped_iters"), path + ": skipped_iters") : 0;
    if (j.contains("loss_scaler")) {
      const json& ls = j.at("loss_scaler");
      MF_CHECK(ls.at("scale").is_number(), path, ": loss_scaler.scale is not a number");
      m.state.loss_scaler = optim::LossScalerState{ls.at("scale").get<double>(),
                                                   int_of(ls.at("growth_tracker"), path + ": loss_scaler.growth_tracker"),
                                                   int_of(ls.at("hysteresis_tracker"), path + ": loss_scaler.hysteresis_tracker")};
    }
    if (j.contains("run")) {
      const json& r = j.at("run");
      m.state.run = RunConstants{int_of(r.at("seq_length"), path + ": run.seq_length"),
                                 int_of(r.at("global_batch_size"), path + ": run.global_batch_size"),
                                 uint_of(r.at("seed"), path + ": run.seed")};
    }
    MF_CHECK(j.at("layout").is_object(), path, ": layout is not an object");
    for (auto& [k, v] : j.at("layout").items()) m.layout[k] = int_of(v, path + ": layout." + k);
    MF_CHECK(j.at("files").is_array(), path, ": files is not an array");
    for (const json& f : j.at("files")) {
      MF_CHECK(f.is_object() && f.contains("name") && f.at("name").is_string(), path, ": a file entry without a name");
      m.files.push_back(f.at("name").get<std::string>());
      const int64_t bytes = int_of(f.at("bytes"), path + ": bytes of " + m.files.back());
      MF_CHECK(bytes >= 0, path, ": file ", m.files.back(), " has ", bytes, " bytes");
      m.file_bytes.push_back(bytes);
      const uint64_t crc = uint_of(f.at("crc32"), path + ": crc32 of " + m.files.back());
      MF_CHECK(crc <= 0xffffffffu, path, ": crc32 ", crc, " of ", m.files.back(), " is not a CRC-32");
      m.file_crc.push_back(static_cast<uint32_t>(crc));
    }
    MF_CHECK(j.at("tensors").is_object(), path, ": tensors is not an object");
    for (auto& [name, t] : j.at("tensors").items()) {
      const std::string what = path + ": tensor '" + name + "'";
      MF_CHECK(t.is_object() && t.contains("dtype") && t.at("dtype").is_string(), what, ": no dtype");
      CheckpointMetadata::Tensor e;
      e.shape = shape_of(t.at("shape"), what + ": shape");
      e.dtype = dtype_from_safetensors(t.at("dtype").get<std::string>(), path);
      const auto elem = static_cast<int64_t>(dtype_nbytes(e.dtype));
      checked_numel(e.shape, elem, what);  // the whole tensor's bytes fit: so do any region's
      MF_CHECK(t.at("pieces").is_array(), what, ": pieces is not an array");
      for (const json& p : t.at("pieces")) {
        MF_CHECK(p.is_object(), what, ": a piece is not an object");
        CheckpointMetadata::Piece piece;
        const int64_t file = int_of(p.at("file"), what + ": piece file");
        MF_CHECK(file >= 0 && file < static_cast<int64_t>(m.files.size()), what, " names file ", file, " of ",
                 m.files.size());
        piece.file = static_cast<int>(file);
        piece.offset = int_of(p.at("offset"), what + ": piece offset");
        piece.region = region_from_json(p);
        check_region(piece.region, e.shape, what);
        const int64_t nbytes = piece.region.numel() * elem;
        const int64_t file_bytes = m.file_bytes[static_cast<size_t>(piece.file)];
        MF_CHECK(int_of(p.at("bytes"), what + ": piece bytes") == nbytes && piece.offset >= 8 &&
                     piece.offset <= file_bytes && nbytes <= file_bytes - piece.offset,
                 what, " has a piece outside ", m.files[static_cast<size_t>(piece.file)]);
        e.pieces.push_back(piece);
      }
      m.tensors.emplace(name, std::move(e));
    }
  } catch (const nlohmann::json::exception& e) {
    MF_THROW(path, ": corrupt checkpoint metadata: ", e.what());
  }
  return m;
}

}  // namespace mf::io
