package definition

import (
	"encoding/xml"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Mermaid node ids of the terminals. Lowercase "end" is a Mermaid keyword
// (it closes a subgraph) and breaks the whole chart, so the terminals get
// capitalised ids; node names are lowercase and cannot collide with them.
const (
	mermaidEnd    = "End"
	mermaidFailed = "Failed"
)

// Mermaid returns the graph as Mermaid flowchart text, in declaration order
// so that the output is stable and diffable:
//
//	flowchart TD
//	  research["research (researcher)"]
//	  validate["validate (email-validator)"]
//	  Failed(("failed"))
//	  research -->|"response.status == #quot;success#quot;"| validate
//	  research -->|"response.status == #quot;failure#quot;"| Failed
//
// Edges to End and Failed go to the terminal nodes End(("end")) and
// Failed(("failed")), declared only when used.
func (w *Workflow) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart TD\n")
	for _, name := range w.NodeOrder {
		label := name
		if n := w.Nodes[name]; n != nil && n.AgentLabel() != "" {
			label += " (" + n.AgentLabel() + ")"
		}
		fmt.Fprintf(&b, "  %s[\"%s\"]\n", mermaidID(name), mermaidText(label))
	}
	usesEnd, usesFailed := false, false
	for _, e := range w.Edges {
		usesEnd = usesEnd || e.To == End
		usesFailed = usesFailed || e.To == Failed
	}
	if usesEnd {
		fmt.Fprintf(&b, "  %s((\"%s\"))\n", mermaidEnd, End)
	}
	if usesFailed {
		fmt.Fprintf(&b, "  %s((\"%s\"))\n", mermaidFailed, Failed)
	}
	for _, e := range w.Edges {
		if e.When != nil {
			fmt.Fprintf(&b, "  %s -->|\"%s\"| %s\n", mermaidID(e.From), mermaidText(e.When.String()), mermaidID(e.To))
		} else {
			fmt.Fprintf(&b, "  %s --> %s\n", mermaidID(e.From), mermaidID(e.To))
		}
	}
	return b.String()
}

// mermaidID maps a node name or terminal to a Mermaid node id. Node names
// that are Mermaid keywords get their first letter capitalised, which no
// node name (always lowercase) can collide with.
func mermaidID(name string) string {
	switch name {
	case End:
		return mermaidEnd
	case Failed:
		return mermaidFailed
	case "graph", "flowchart", "subgraph", "style", "linkstyle", "classdef", "class",
		"click", "call", "href", "default", "direction", "interpolate":
		return strings.ToUpper(name[:1]) + name[1:]
	}
	return name
}

// mermaidText escapes a label for use inside "...": Mermaid reads #name;
// entity codes there, so "#" itself is escaped first, then the characters
// that would end the string or be taken as HTML.
func mermaidText(s string) string {
	return strings.NewReplacer(
		"#", "#35;",
		`"`, "#quot;",
		"<", "#lt;",
		">", "#gt;",
		"\r\n", " ",
		"\n", " ",
		"\r", " ",
	).Replace(s)
}

// Layout of the SVG drawing, in pixels.
const (
	svgMargin     = 30.0
	svgBoxH       = 44.0
	svgHGap       = 40.0
	svgVGap       = 90.0
	svgMinBoxW    = 90.0
	svgNameCharW  = 7.5 // 13px bold sans-serif, a generous average
	svgAgentCharW = 6.5 // 11px sans-serif
	svgLabelCharW = 6.0 // 10px monospace
	svgLabelMax   = 48  // longer conditions are cut in the label; the full text is in the edge's title
	svgArrowLen   = 10.0
	svgArrowHalf  = 5.0
	svgParallel   = 14.0 // horizontal distance between edges joining the same two nodes
)

// svgBox is one drawn node (or terminal).
type svgBox struct {
	name, agent string
	terminal    bool
	level       int
	x, y, w, h  float64
}

func (b *svgBox) cx() float64 { return b.x + b.w/2 }
func (b *svgBox) cy() float64 { return b.y + b.h/2 }

// svgEdge is one edge's geometry: a cubic Bézier (a straight line has its
// control points on the line), the point of its label, and its style.
type svgEdge struct {
	edge           *Edge
	p0, p1, p2, p3 [2]float64
	label          [2]float64
	labelStart     bool // label starts at the point (curves bulging right) rather than centred on it
	taken          bool
}

// SVG returns a standalone SVG document of the workflow: no scripts, no
// external references, no foreignObject, so it can be served inline to a
// browser without a sanitizer. Nodes are laid out by levels (BFS depth from
// start; nodes not reachable after them; End and Failed in the last level)
// as rounded boxes with the node name and agent; edges are drawn with
// arrowheads and their condition as label. The edges between consecutive
// nodes of path are highlighted (class="taken") and the node named current
// (may be "") has class="current". All text is XML-escaped: node names come
// from config, and conditions contain quotes and < >.
func (w *Workflow) SVG(path []string, current string) []byte {
	boxes, rows := w.svgLayout(path, current)

	innerW := 0.0
	for _, row := range rows {
		innerW = math.Max(innerW, rowWidth(row))
	}
	for _, row := range rows {
		x := svgMargin + (innerW-rowWidth(row))/2
		for _, b := range row {
			b.x, b.y = x, svgMargin+float64(b.level)*(svgBoxH+svgVGap)
			x += b.w + svgHGap
		}
	}

	taken := map[[2]string]bool{}
	for i := 0; i+1 < len(path); i++ {
		taken[[2]string{path[i], path[i+1]}] = true
	}
	edges := w.svgEdges(boxes, taken)
	placeLabels(edges, boxes)

	width := svgMargin*2 + innerW
	height := svgMargin*2 + svgBoxH
	if len(rows) > 0 {
		height = svgMargin*2 + float64(len(rows))*svgBoxH + float64(len(rows)-1)*svgVGap
	}
	// Back edges and self loops bulge to the right and same-level edges
	// below the boxes; grow the canvas to whatever the edges reach.
	for _, e := range edges {
		for _, p := range [][2]float64{e.p1, e.p2} {
			width = math.Max(width, p[0]+svgMargin)
			height = math.Max(height, p[1]+svgMargin)
		}
		right := e.label[0] + labelWidth(e.edge)/2
		if e.labelStart {
			right = e.label[0] + labelWidth(e.edge)
		}
		width = math.Max(width, right+svgMargin)
		height = math.Max(height, e.label[1]+svgMargin)
	}

	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="sans-serif">`+"\n",
		num(width), num(height), num(width), num(height))
	fmt.Fprintf(&b, "<title>workflow %s</title>\n", esc(w.Name))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", num(width), num(height))

	// Edges first so that boxes cover their ends, labels last so that
	// nothing covers them.
	for _, e := range edges {
		writeSVGEdge(&b, e)
	}
	for _, row := range rows {
		for _, bx := range row {
			writeSVGBox(&b, bx, bx.name == w.Start && !bx.terminal, bx.name == current)
		}
	}
	for _, e := range edges {
		writeSVGLabel(&b, e)
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// svgLayout assigns every node and used terminal a level and a size, and
// groups them into rows in declaration order.
func (w *Workflow) svgLayout(path []string, current string) (map[string]*svgBox, [][]*svgBox) {
	level := map[string]int{}
	if _, ok := w.Nodes[w.Start]; ok {
		level[w.Start] = 0
		queue := []string{w.Start}
		for len(queue) > 0 {
			cur := queue[0]
			queue = queue[1:]
			for _, e := range w.Edges {
				if e.From != cur {
					continue
				}
				if _, isNode := w.Nodes[e.To]; !isNode {
					continue
				}
				if _, done := level[e.To]; !done {
					level[e.To] = level[cur] + 1
					queue = append(queue, e.To)
				}
			}
		}
	}
	last := -1
	for _, l := range level {
		last = max(last, l)
	}
	// Nodes the BFS did not reach (only in a hand-built or invalid
	// workflow) still get drawn, one level below the reachable ones.
	unreached := false
	for _, name := range w.NodeOrder {
		if _, ok := level[name]; !ok {
			level[name] = last + 1
			unreached = true
		}
	}
	if unreached {
		last++
	}

	uses := map[string]bool{current: true}
	for _, e := range w.Edges {
		uses[e.To] = true
	}
	for _, p := range path {
		uses[p] = true
	}

	boxes := map[string]*svgBox{}
	rows := make([][]*svgBox, last+1)
	for _, name := range w.NodeOrder {
		if boxes[name] != nil {
			continue
		}
		bx := &svgBox{name: name, level: level[name], h: svgBoxH}
		if n := w.Nodes[name]; n != nil {
			bx.agent = n.AgentLabel()
		}
		bx.w = math.Max(svgMinBoxW, math.Max(
			float64(utf8.RuneCountInString(bx.name))*svgNameCharW,
			float64(utf8.RuneCountInString(bx.agent))*svgAgentCharW)+24)
		boxes[name] = bx
		rows[bx.level] = append(rows[bx.level], bx)
	}
	var terms []*svgBox
	for _, t := range []string{End, Failed} {
		if uses[t] {
			bx := &svgBox{name: t, terminal: true, level: last + 1, w: svgMinBoxW, h: svgBoxH}
			boxes[t] = bx
			terms = append(terms, bx)
		}
	}
	if len(terms) > 0 {
		rows = append(rows, terms)
	}
	return boxes, rows
}

func rowWidth(row []*svgBox) float64 {
	w := 0.0
	for i, b := range row {
		if i > 0 {
			w += svgHGap
		}
		w += b.w
	}
	return w
}

// svgEdges computes the geometry of every drawable edge.
func (w *Workflow) svgEdges(boxes map[string]*svgBox, taken map[[2]string]bool) []svgEdge {
	// Edges joining the same two nodes (different conditions) are spread
	// apart so that each stays visible with its own label, and the labels
	// of a fan-out to the next level are staggered in height.
	count := map[[2]string]int{}
	fan := map[string]int{}
	for _, e := range w.Edges {
		count[[2]string{e.From, e.To}]++
		if a, b := boxes[e.From], boxes[e.To]; a != nil && b != nil && b.level == a.level+1 && e.When != nil {
			fan[e.From]++
		}
	}
	seen := map[[2]string]int{}
	fanSeen := map[string]int{}
	var out []svgEdge
	for _, e := range w.Edges {
		a, b := boxes[e.From], boxes[e.To]
		if a == nil || b == nil {
			continue
		}
		key := [2]string{e.From, e.To}
		k, n := seen[key], count[key]
		seen[key]++
		off := (float64(k) - float64(n-1)/2) * svgParallel
		se := svgEdge{edge: e, taken: taken[key]}
		switch {
		case a == b:
			// A self loop on the right side of the box.
			x, y := a.x+a.w, a.cy()
			reach := 45 + float64(k)*svgParallel
			se.p0 = [2]float64{x, y - 8}
			se.p1 = [2]float64{x + reach, y - 30}
			se.p2 = [2]float64{x + reach, y + 30}
			se.p3 = [2]float64{x, y + 8}
			se.label, se.labelStart = bezier(se, 0.5), true
		case b.level == a.level+1:
			// To the next level: a straight line from the bottom of a
			// to the top of b; labels of parallel edges at different
			// heights.
			se.p0 = [2]float64{a.cx() + off, a.y + a.h}
			se.p3 = [2]float64{b.cx() + off, b.y}
			se.p1 = lerp(se.p0, se.p3, 1.0/3)
			se.p2 = lerp(se.p0, se.p3, 2.0/3)
			t := 0.5
			if m := fan[e.From]; m > 1 && e.When != nil {
				step := math.Min(0.2, 0.6/float64(m-1))
				t += (float64(fanSeen[e.From]) - float64(m-1)/2) * step
				fanSeen[e.From]++
			}
			se.label = lerp(se.p0, se.p3, t)
		case b.level > a.level:
			// Skipping levels: a straight line would cross the boxes in
			// between, so the curve swings out right of them.
			x := rightOf(boxes, a.level+1, b.level-1) + 40 + float64(k)*svgParallel
			se.p0 = [2]float64{a.cx() + off, a.y + a.h}
			se.p1 = [2]float64{x, a.y + a.h + svgVGap/2}
			se.p2 = [2]float64{x, b.y - svgVGap/2}
			se.p3 = [2]float64{b.cx() + off, b.y}
			se.label, se.labelStart = bezier(se, 0.5), true
		case b.level == a.level:
			// Same level: a curve below both boxes.
			dip := 45 + float64(k)*svgParallel
			se.p0 = [2]float64{a.cx(), a.y + a.h}
			se.p1 = [2]float64{a.cx(), a.y + a.h + dip}
			se.p2 = [2]float64{b.cx(), b.y + b.h + dip}
			se.p3 = [2]float64{b.cx(), b.y + b.h}
			se.label = bezier(se, 0.5)
		default:
			// Back edge: a curve around the right side of both boxes and
			// of every box in between.
			x := rightOf(boxes, b.level, a.level) + 60 + float64(k)*svgParallel
			se.p0 = [2]float64{a.x + a.w, a.cy()}
			se.p1 = [2]float64{x, a.cy()}
			se.p2 = [2]float64{x, b.cy()}
			se.p3 = [2]float64{b.x + b.w, b.cy()}
			se.label, se.labelStart = bezier(se, 0.5), true
		}
		out = append(out, se)
	}
	return out
}

// placeLabels moves labels that would cover another label or a box up or
// down, greedily in edge order, so that every condition stays readable.
// A label with no free place nearby keeps its position.
func placeLabels(edges []svgEdge, boxes map[string]*svgBox) {
	type rect struct{ x0, y0, x1, y1 float64 }
	overlaps := func(a, b rect) bool {
		return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1
	}
	var taken []rect
	for _, b := range boxes {
		taken = append(taken, rect{b.x, b.y, b.x + b.w, b.y + b.h})
	}
	labelRect := func(e *svgEdge, dy float64) rect {
		w := labelWidth(e.edge)
		x0 := e.label[0] - w/2
		if e.labelStart {
			x0 = e.label[0]
		}
		return rect{x0, e.label[1] - 9 + dy, x0 + w, e.label[1] + 9 + dy}
	}
	for i := range edges {
		e := &edges[i]
		if labelText(e.edge) == "" {
			continue
		}
		best := 0.0
		for _, dy := range []float64{0, 18, -18, 36, -36, 54, -54} {
			r := labelRect(e, dy)
			if r.y0 < 0 {
				continue
			}
			free := true
			for _, o := range taken {
				if overlaps(r, o) {
					free = false
					break
				}
			}
			if free {
				best = dy
				break
			}
		}
		e.label[1] += best
		taken = append(taken, labelRect(e, 0))
	}
}

// rightOf returns the rightmost x reached by the boxes of levels lo..hi.
func rightOf(boxes map[string]*svgBox, lo, hi int) float64 {
	right := 0.0
	for _, b := range boxes {
		if b.level >= lo && b.level <= hi {
			right = math.Max(right, b.x+b.w)
		}
	}
	return right
}

func lerp(a, b [2]float64, t float64) [2]float64 {
	return [2]float64{a[0] + (b[0]-a[0])*t, a[1] + (b[1]-a[1])*t}
}

func bezier(e svgEdge, t float64) [2]float64 {
	u := 1 - t
	var p [2]float64
	for i := range p {
		p[i] = u*u*u*e.p0[i] + 3*u*u*t*e.p1[i] + 3*u*t*t*e.p2[i] + t*t*t*e.p3[i]
	}
	return p
}

func writeSVGEdge(b *strings.Builder, e svgEdge) {
	class, stroke, width := "edge", "#868e96", "1.5"
	if e.taken {
		class, stroke, width = "taken", "#1c7ed6", "3"
	}
	fmt.Fprintf(b, `<g data-from="%s" data-to="%s">`, esc(e.edge.From), esc(e.edge.To))
	if e.edge.When != nil {
		fmt.Fprintf(b, "<title>%s</title>", esc(e.edge.When.String()))
	}
	fmt.Fprintf(b, `<path class="%s" d="M %s %s C %s %s %s %s %s %s" fill="none" stroke="%s" stroke-width="%s"/>`,
		class, num(e.p0[0]), num(e.p0[1]), num(e.p1[0]), num(e.p1[1]), num(e.p2[0]), num(e.p2[1]), num(e.p3[0]), num(e.p3[1]), stroke, width)
	// The arrowhead is a polygon rather than a marker: markers are
	// referenced by url(#id), which some sanitizers and embedders strip.
	dx, dy := e.p3[0]-e.p2[0], e.p3[1]-e.p2[1]
	if dx == 0 && dy == 0 {
		dx, dy = e.p3[0]-e.p0[0], e.p3[1]-e.p0[1]
	}
	l := math.Hypot(dx, dy)
	if l == 0 {
		dx, dy, l = 0, 1, 1
	}
	ux, uy := dx/l, dy/l
	bx, by := e.p3[0]-ux*svgArrowLen, e.p3[1]-uy*svgArrowLen
	fmt.Fprintf(b, `<polygon class="%s-arrow" points="%s,%s %s,%s %s,%s" fill="%s"/>`,
		class, num(e.p3[0]), num(e.p3[1]),
		num(bx-uy*svgArrowHalf), num(by+ux*svgArrowHalf),
		num(bx+uy*svgArrowHalf), num(by-ux*svgArrowHalf), stroke)
	b.WriteString("</g>\n")
}

func labelText(e *Edge) string {
	if e.When == nil {
		return ""
	}
	s := strings.Join(strings.Fields(e.When.String()), " ")
	if utf8.RuneCountInString(s) > svgLabelMax {
		r := []rune(s)
		s = string(r[:svgLabelMax-1]) + "…"
	}
	return s
}

func labelWidth(e *Edge) float64 {
	return float64(utf8.RuneCountInString(labelText(e)))*svgLabelCharW + 8
}

func writeSVGLabel(b *strings.Builder, e svgEdge) {
	text := labelText(e.edge)
	if text == "" {
		return
	}
	w := labelWidth(e.edge)
	x, y := e.label[0], e.label[1]
	fill := "#495057"
	if e.taken {
		fill = "#1c7ed6"
	}
	left, anchor, tx := x-w/2, "middle", x
	if e.labelStart {
		left, anchor, tx = x, "start", x+4
	}
	fmt.Fprintf(b, `<g class="label"><rect x="%s" y="%s" width="%s" height="16" rx="3" fill="#ffffff" fill-opacity="0.9"/>`,
		num(left), num(y-8), num(w))
	fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="%s" font-family="monospace" font-size="10" fill="%s">%s</text></g>`+"\n",
		num(tx), num(y+3.5), anchor, fill, esc(text))
}

func writeSVGBox(b *strings.Builder, bx *svgBox, start, current bool) {
	class, fill, stroke, width := "node", "#f1f3f5", "#495057", "1.5"
	rx := "8"
	switch {
	case bx.terminal && bx.name == End:
		class, fill, stroke = "terminal", "#d3f9d8", "#2b8a3e"
	case bx.terminal:
		class, fill, stroke = "terminal", "#ffe3e3", "#c92a2a"
	}
	if bx.terminal {
		rx = num(bx.h / 2)
	}
	if start {
		width = "2.5"
	}
	if current {
		class, fill, stroke, width = "current", "#ffe066", "#e67700", "3"
	}
	title := bx.name
	if bx.agent != "" {
		title += " (" + bx.agent + ")"
	}
	fmt.Fprintf(b, `<g data-node="%s"><title>%s</title>`, esc(bx.name), esc(title))
	fmt.Fprintf(b, `<rect class="%s" x="%s" y="%s" width="%s" height="%s" rx="%s" fill="%s" stroke="%s" stroke-width="%s"/>`,
		class, num(bx.x), num(bx.y), num(bx.w), num(bx.h), rx, fill, stroke, width)
	if bx.agent == "" {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="13" font-weight="bold" fill="#212529">%s</text>`,
			num(bx.cx()), num(bx.cy()+4.5), esc(bx.name))
	} else {
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="13" font-weight="bold" fill="#212529">%s</text>`,
			num(bx.cx()), num(bx.y+18), esc(bx.name))
		fmt.Fprintf(b, `<text x="%s" y="%s" text-anchor="middle" font-size="11" fill="#495057">%s</text>`,
			num(bx.cx()), num(bx.y+34), esc(bx.agent))
	}
	b.WriteString("</g>\n")
}

// esc escapes text for XML content and attribute values alike (quotes
// included); characters XML cannot carry become U+FFFD.
func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder never fails
	return b.String()
}

// num formats a coordinate with at most one decimal.
func num(v float64) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64)
}
