# METADATA
# title: content_size
# description: |
#   The request's content must not exceed protocol limits.max_content_size
#   bytes (UTF-8), the approval protocol's "_check_content_format" size part.
package gateway.rules.approval.content_size

import data.gateway.lib.approval as lib

# METADATA
# title: Content too large
# description: content is larger than limits.max_content_size bytes.
violations contains {
	"rule": "content_size",
	"description": sprintf("content is %d bytes, over the limit of %d", [size, limit]),
	"suggestion": "split the change into smaller requests or reference the large parts instead of inlining them",
} if {
	limit := lib.protocol.limits.max_content_size

	# A character is at most 4 bytes: only content that may be over the
	# limit is measured in bytes (hex doubles the byte count).
	count(input.request.content) * 4 > limit
	size := count(hex.encode(input.request.content)) / 2
	size > limit
}
