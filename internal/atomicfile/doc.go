// Package atomicfile replaces a file so that a crash leaves either the old
// content or the new, never a mix, and a failed write leaves nothing
// behind: the node's small files and checkpoint, and the auditor's
// exports. Safe for concurrent use on different paths.
package atomicfile
