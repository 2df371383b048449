// A small XML well-formedness checker for the SVG and HTML-embedded SVG that
// viz/ writes: matched and properly nested tags, quoted attributes, known
// entities, one root element. Not a validating parser (no DTDs, no
// namespaces); enough to catch broken markup in tests.
#ifndef GPUSIM_VIZ_XML_CHECK_H_
#define GPUSIM_VIZ_XML_CHECK_H_

#include <string_view>

#include "absl/status/status.h"

namespace gpusim {

// InvalidArgument naming the byte offset of the first problem.
absl::Status CheckXmlWellFormed(std::string_view xml);

}  // namespace gpusim

#endif  // GPUSIM_VIZ_XML_CHECK_H_
