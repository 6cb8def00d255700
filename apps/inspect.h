// `fitgrad inspect FILE`: lists the tensors (name, dtype, shape, bytes) and the metadata of
// a safetensors or GGUF file, telling the two apart by their first bytes.
#pragma once

#include <ostream>
#include <string>

namespace fitgrad::apps {

// Writes the listing to `out`; throws fitgrad::Error naming the file when it is neither
// format or is malformed. A directory is taken as a checkpoint: every file is verified
// against its manifest first, and a damaged or missing file is an error naming it.
void inspect_file(const std::string& path, std::ostream& out);

}  // namespace fitgrad::apps
