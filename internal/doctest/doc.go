// Package doctest holds the test that keeps the snippets of README.md and
// docs/*.md true: every fenced code block is checked by "go test
// ./internal/doctest" (JSON, YAML and Rego parse; shell snippets run
// against a gateway serving the shipped configuration; an example answer has
// the shape of the real one), or says in an annotation why it is not.
//
// An annotation is an HTML comment on the line right before the fence:
//
//	<!-- doctest: run -->                  a sh block that is executed
//	<!-- doctest: run status=422 -->       ... whose curl may also get a 422
//	<!-- doctest: skip REASON -->          any block that is not checked, and why
//	<!-- doctest: response -->             a json block: the shape of the answer of the run block before it
//	<!-- doctest: response complete -->    ... and every member of the real answer is shown
//	<!-- doctest: file PATH -->            the block is the file PATH of the repository (JSON and YAML compared as values)
//	<!-- doctest: config NAME -->          a yaml block: as config/NAME of the shipped configuration, "gateway config check" passes
//	<!-- doctest: rego-fragment -->        a rego block without a package line
//
// The rules, the rewrites applied to run blocks and the tools they need are
// described in doctest_test.go.
package doctest
