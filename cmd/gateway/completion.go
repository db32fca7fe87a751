package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// completionMain is "gateway completion bash|zsh|fish": a completion
// script built from the command table and each command's own flags, so a
// new command or flag is completed without anyone editing a script.
func completionMain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("completion", stderr)
	if err := fs.Parse(args); err != nil {
		return helpOrUsage(err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "usage: gateway completion bash|zsh|fish")
		return exitUsage
	}
	switch fs.Arg(0) {
	case "bash":
		fmt.Fprint(stdout, bashCompletion(completionTree()))
	case "zsh":
		fmt.Fprint(stdout, zshCompletion(completionTree()))
	case "fish":
		fmt.Fprint(stdout, fishCompletion(completionTree()))
	default:
		fmt.Fprintf(stderr, "gateway completion: unknown shell %q (want bash, zsh or fish)\n", fs.Arg(0))
		return exitUsage
	}
	return exitOK
}

// completionNode is what may follow a command path: subcommand words (with
// their summaries), fixed argument words, and flags.
type completionNode struct {
	path    string // "", "config", "config check"
	summary string
	words   []string // subcommands or fixed arguments, in table order
	flags   []flagInfo
}

// choices is a synopsis that is a list of fixed words ("bash|zsh|fish").
var choices = regexp.MustCompile(`^[a-z]+(\|[a-z]+)+$`)

// completionTree is the command table as nodes: the root, each group, and
// each command, in table order.
func completionTree() []completionNode {
	root := completionNode{}
	nodes := []completionNode{}
	groups := map[string]int{} // group word -> index in nodes
	for _, c := range commands() {
		first, _, grouped := strings.Cut(c.path, " ")
		if grouped {
			i, ok := groups[first]
			if !ok {
				root.words = append(root.words, first)
				nodes = append(nodes, completionNode{path: first, summary: first + " commands"})
				i = len(nodes) - 1
				groups[first] = i
			}
			nodes[i].words = append(nodes[i].words, strings.TrimPrefix(c.path, first+" "))
		} else {
			root.words = append(root.words, c.path)
		}
		n := completionNode{path: c.path, summary: c.summary, flags: flagsOf(c)}
		switch {
		case choices.MatchString(c.args):
			n.words = strings.Split(c.args, "|")
		case c.path == "help":
			n.words = root.words // filled in below, once the root is complete
		}
		nodes = append(nodes, n)
	}
	for i := range nodes {
		if nodes[i].path == "help" {
			nodes[i].words = root.words
		}
	}
	return append([]completionNode{root}, nodes...)
}

// summaryOf is the table's summary of a path's word.
func summaryOf(nodes []completionNode, path string) string {
	for _, n := range nodes {
		if n.path == path {
			return n.summary
		}
	}
	return ""
}

func dashed(path string) string { return strings.ReplaceAll(path, " ", "-") }

func bashCompletion(nodes []completionNode) string {
	var b strings.Builder
	b.WriteString(`# bash completion for gateway (made by "gateway completion bash").
# Load it with: source <(gateway completion bash)
_gateway() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path="" w i
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case "$path:$w" in
`)
	var steps []string
	for _, n := range nodes[1:] {
		parent, word := "", n.path
		if p, w, ok := strings.Cut(n.path, " "); ok {
			parent, word = p, w
		}
		steps = append(steps, dashed(parent)+":"+word)
	}
	fmt.Fprintf(&b, "\t\t%s) path=${path:+$path-}$w ;;\n\t\tesac\n\tdone\n", strings.Join(steps, "|"))
	// A flag that takes a value: leave the word to the shell's file names.
	var valued []string
	for _, n := range nodes {
		for _, f := range n.flags {
			if f.value {
				valued = append(valued, dashed(n.path)+":-"+f.name, dashed(n.path)+":--"+f.name)
			}
		}
	}
	if len(valued) > 0 {
		fmt.Fprintf(&b, "\tcase \"$path:$prev\" in\n\t%s) return ;;\n\tesac\n", strings.Join(valued, "|"))
	}
	b.WriteString("\tlocal words=\"\"\n\tcase $path in\n")
	for _, n := range nodes {
		words := append([]string{}, n.words...)
		for _, f := range n.flags {
			words = append(words, "--"+f.name)
		}
		if len(words) > 0 {
			fmt.Fprintf(&b, "\t\"%s\") words=\"%s\" ;;\n", dashed(n.path), strings.Join(words, " "))
		}
	}
	b.WriteString(`	esac
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _gateway gateway
`)
	return b.String()
}

// zshCompletion runs the bash script through zsh's bash completion layer.
func zshCompletion(nodes []completionNode) string {
	return `# zsh completion for gateway (made by "gateway completion zsh").
# Load it with: source <(gateway completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
` + strings.SplitN(bashCompletion(nodes), "\n", 3)[2]
}

func fishCompletion(nodes []completionNode) string {
	var b strings.Builder
	b.WriteString(`# fish completion for gateway (made by "gateway completion fish").
# Load it with: gateway completion fish | source
complete -c gateway -f
`)
	for _, n := range nodes {
		var cond string
		switch p, w, grouped := strings.Cut(n.path, " "); {
		case n.path == "":
			cond = "__fish_use_subcommand"
		case grouped:
			cond = "__fish_seen_subcommand_from " + p + "; and __fish_seen_subcommand_from " + w
		default:
			cond = "__fish_seen_subcommand_from " + n.path
		}
		if n.path == "serve" {
			cond = "__fish_use_subcommand; or " + cond // flags first mean serve
		}
		// A word is offered until one of its kind is on the line ("help"
		// itself is not one of help's arguments).
		wordCond := cond
		if n.path != "" {
			last := n.path[strings.LastIndex(n.path, " ")+1:]
			others := slices.DeleteFunc(slices.Clone(n.words), func(w string) bool { return w == last })
			wordCond += "; and not __fish_seen_subcommand_from " + strings.Join(others, " ")
		}
		for _, w := range n.words {
			desc := summaryOf(nodes, strings.TrimSpace(n.path+" "+w))
			if n.path == "help" || desc == "" {
				desc = strings.TrimSpace(strings.TrimPrefix(n.path+" ", "help ") + w)
			}
			fmt.Fprintf(&b, "complete -c gateway -n %s -a %s -d %s\n", fishQuote(wordCond), w, fishQuote(desc))
		}
		for _, f := range n.flags {
			value := ""
			if f.value {
				value = " -r -F"
			}
			fmt.Fprintf(&b, "complete -c gateway -n %s -l %s%s -d %s\n", fishQuote(cond), f.name, value, fishQuote(f.summary))
		}
	}
	return b.String()
}

func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
