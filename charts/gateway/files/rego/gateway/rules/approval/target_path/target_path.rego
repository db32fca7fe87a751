# METADATA
# title: target_path
# description: |
#   target_path becomes approved_location, where the agent writes: it must be
#   a relative path that stays inside the repository (no leading "/", no
#   ".." segment, no backslash, no drive letter).
package gateway.rules.approval.target_path

# METADATA
# title: Unsafe target path
# description: target_path is absolute or climbs out of the tree.
violations contains {
	"rule": "target_path",
	"description": sprintf("target_path %q must be relative and must not contain \"..\"", [input.request.target_path]),
	"suggestion": "give target_path relative to the repository root, e.g. docs/design/feature.md",
} if {
	# absolute, a drive letter, a backslash, or a ".." segment
	regex.match(`^/|^[A-Za-z]:|\\|(^|/)\.\.(/|$)`, input.request.target_path)
}
