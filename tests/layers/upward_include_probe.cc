// Compiled only by the test "layers:upward include does not compile" (EXCLUDE_FROM_ALL): a file
// linked to the state layer alone includes a header of the node layer, above it. The build must
// refuse it because the node layer's headers are not on the state layer's include path.
#include "epoch/node/node_context.h"
