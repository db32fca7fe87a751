package gateway.rules.approval.target_path_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.target_path as rule

test_relative_paths_pass[tc.note] if {
	some tc in [
		{"note": "seed example", "path": "docs/design/new-feature.md"},
		{"note": "dots inside a name", "path": "docs/a..b.md"},
		{"note": "current directory", "path": "./docs/x.md"},
	]
	count(rule.violations) == 0 with input as fixtures.with_fields({"target_path": tc.path})
}

test_no_path_passes if {
	count(rule.violations) == 0 with input as fixtures.without("target_path")
}

test_escaping_paths_violate[tc.note] if {
	some tc in [
		{"note": "absolute", "path": "/etc/passwd"},
		{"note": "parent", "path": "../secrets.md"},
		{"note": "climbs in the middle", "path": "docs/../../x.md"},
		{"note": "backslash", "path": `docs\..\x.md`},
		{"note": "drive letter", "path": "C:/x.md"},
	]
	violations := rule.violations with input as fixtures.with_fields({"target_path": tc.path})
	some v in violations
	v.rule == "target_path"
	v.description == sprintf(`target_path %q must be relative and must not contain ".."`, [tc.path])
}
