// Package cronfile reads cron jobs written in paxcron's HCL format: one
// or more `cron "<name>" { ... }` blocks, each becoming a job name and a
// state.JobSpec, checked as the replicated state would check them before
// anything is written. Errors carry the file, line and column of what is
// wrong.
//
//	cron "nightly-report" {
//	  schedule       = "0 ? * * *"
//	  time_zone      = "Europe/Berlin"
//	  concurrency    = "forbid"
//	  catchup_window = "10m"
//	  delivery       = "at-most-once"      # or at-least-once
//	  nomad {
//	    job       = "report"          # a parameterized job in Nomad
//	    namespace = "analytics"
//	    region    = "eu"
//	    meta      = { kind = "nightly" }
//	    payload   = file("params.json")
//	  }
//	}
//
// Expressions may call file(path), read relative to the HCL file's
// folder, and jsonencode(value). A file must be UTF-8 in Unicode normal
// form C (the parser would change other text to it). Whether the Nomad
// job exists, is parameterized and gets the meta it requires is Nomad's
// to say: the nomad package checks that when a job is submitted.
package cronfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apparentlymart/go-textseg/v15/textseg"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	"golang.org/x/text/unicode/norm"

	"paxcron/cron/schedule"
	"paxcron/cron/state"
	"paxcron/internal/api"
	"paxcron/internal/hcltext"
)

// Limits on what a file may hold.
const (
	// MaxFileBytes bounds an HCL file.
	MaxFileBytes = 4 << 20
	// MaxCrons bounds the cron blocks of one file.
	MaxCrons = 10_000
)

// Cron is one cron block.
type Cron struct {
	Name string
	Spec state.JobSpec
	// Resolved is the schedule as it runs for this job: ? and H replaced
	// by the values the job's name hashes to.
	Resolved string
	// Range is where the block is, for messages about it.
	Range hcl.Range
}

// Error is every problem found in a file, each with its position.
type Error struct {
	Diagnostics hcl.Diagnostics
}

func (e *Error) Error() string {
	var b strings.Builder
	for i, d := range e.Diagnostics {
		if i > 0 {
			b.WriteByte('\n')
		}
		if d.Subject != nil {
			fmt.Fprintf(&b, "%s:%d,%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
		}
		b.WriteString(d.Summary)
		if d.Detail != "" {
			b.WriteString(": ")
			b.WriteString(d.Detail)
		}
	}
	return b.String()
}

// ParseFile reads and parses the file at path; file() calls read relative
// to its folder.
func ParseFile(path string) ([]Cron, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cronfile: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("cronfile: reading %s: %w", path, err)
	}
	return Parse(path, src, filepath.Dir(path))
}

// Parse parses src, named filename in messages; file() calls read
// relative to dir.
func Parse(filename string, src []byte, dir string) ([]Cron, error) {
	return parse(filename, src, evalContext(fileFunc(dir)))
}

// ParseSubmitted parses src as a server parses a file submitted to its
// API: file() is refused, since it would read the server's disk (the CLI
// resolves file() on the submitter's machine and sends the content).
func ParseSubmitted(filename string, src []byte) ([]Cron, error) {
	return parse(filename, src, evalContext(noFileFunc))
}

// MaxNesting bounds how deep expressions nest in a file: each open
// bracket, brace, parenthesis, template interpolation or directive counts
// one level, and so does each template if directive inside another and
// each operator of an expression not yet ended (see checkShape). Far
// beyond a cron file's needs.
const MaxNesting = 32

// checkShape refuses, before the parser sees them, files that would cost
// the parser or the evaluator without bound: the parser recurses once per
// nesting level (70,000 levels in 140 KB overflowed the goroutine's stack,
// a fatal error that killed the server), and a for expression nested in
// another multiplies the work (six of them in 300 bytes took 2.4 s). A
// cron file needs neither. Found in review. The lexer does not recurse.
//
// Brackets are not the only nesting: the parser or the evaluator also
// recurses once per operator of a chain (- - 1, a ? b : c ? d : e, 1 + 1
// + 1, x[*][*]) and per if directive inside another, so these count as
// levels too (each chain overflowed the stack in a file of 4 MB or less;
// found in a later review, TestUnbracketedNestingIsRefused). An
// expression's operators stop counting where it ends: at a comma, at the
// end of its bracket, or at a newline in a body or an object (elsewhere
// the parser reads on across newlines).
func checkShape(filename string, src []byte) error {
	tokens, diags := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return &Error{Diagnostics: diags}
	}
	type frame struct {
		newlineEnds bool // a newline ends an expression here
		ops         int  // operators of the expression not yet ended
	}
	frames := []frame{{newlineEnds: true}} // the file's body, then each open bracket
	ops, ifs := 0, 0                       // operators over all frames; template ifs open
	var prev hclsyntax.TokenType
	for _, tok := range tokens {
		top := &frames[len(frames)-1]
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			if tok.Type == hclsyntax.TokenOBrack && endsOperand(prev) {
				top.ops++ // an index or a splat, x[0] or x[*]
				ops++
			}
			frames = append(frames, frame{newlineEnds: tok.Type == hclsyntax.TokenOBrace})
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenTemplateSeqEnd:
			if len(frames) > 1 { // a closer with nothing open makes no room
				ops -= top.ops
				frames = frames[:len(frames)-1]
			}
		case hclsyntax.TokenComma:
			ops -= top.ops
			top.ops = 0
		case hclsyntax.TokenNewline, hclsyntax.TokenComment:
			// A line comment takes its newline with it.
			if top.newlineEnds && bytes.HasSuffix(tok.Bytes, []byte("\n")) {
				ops -= top.ops
				top.ops = 0
			}
		case hclsyntax.TokenMinus, hclsyntax.TokenBang, hclsyntax.TokenPlus, hclsyntax.TokenStar, hclsyntax.TokenSlash,
			hclsyntax.TokenPercent, hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan,
			hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd,
			hclsyntax.TokenOr, hclsyntax.TokenQuestion, hclsyntax.TokenDot:
			top.ops++
			ops++
		case hclsyntax.TokenIdent:
			// A template's %{ for } directive repeats text as a for
			// expression repeats values (found in a later review: see
			// TestHostileShapesAreRefused).
			if string(tok.Bytes) == "for" && (prev == hclsyntax.TokenOBrack || prev == hclsyntax.TokenOBrace || prev == hclsyntax.TokenTemplateControl) {
				r := tok.Range
				return &Error{Diagnostics: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "For expression not allowed",
					Detail: "a cron file's values are written out: for expressions and template for directives are not evaluated", Subject: &r}}}
			}
			if prev == hclsyntax.TokenTemplateControl {
				switch string(tok.Bytes) {
				case "if":
					ifs++
				case "endif":
					ifs = max(ifs-1, 0)
				}
			}
		}
		if len(frames)-1+ops+ifs > MaxNesting {
			r := tok.Range
			return &Error{Diagnostics: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Nested too deep",
				Detail: fmt.Sprintf("brackets, braces, parentheses, template directives and the operators of one expression nest at most %d deep in a cron file", MaxNesting), Subject: &r}}}
		}
		// The parser skips comments as it skips newlines: [ /* */ for
		// is a for expression too (found in review).
		if tok.Type != hclsyntax.TokenNewline && tok.Type != hclsyntax.TokenComment {
			prev = tok.Type
		}
	}
	return nil
}

// checkNFC refuses src unless it is in Unicode normal form C. The HCL
// parser turns every string it reads (a quoted string, a heredoc, an
// object key) into NFC without a word, so text written in another form,
// a decomposed "café" in a meta value say, would reach Nomad changed;
// file() refuses such content for the same reason. The whole source is
// checked, comments included: the rule is simple to state, and an editor
// that decomposes text does so throughout. NFC text passes in one quick
// pass (norm's IsNormal: 12 ms for a 4 MB file on a 2-core test host);
// only a file that fails is read again to find its first offending
// character, reported at its line and column as HCL counts them
// (grapheme clusters; 0.3 s for one at the end of a single 4 MB line).
// Invalid UTF-8 passes here: the parser reports it.
func checkNFC(filename string, src []byte) error {
	if norm.NFC.IsNormal(src) {
		return nil
	}
	off, _ := norm.NFC.Span(src, true) // the normal prefix
	end := off + norm.NFC.NextBoundary(src[off:], true)
	if end <= off || end > len(src) { // not expected: the whole rest
		end = len(src)
	}
	seg := src[off:end]
	r := hcl.Range{Filename: filename, Start: posAt(src, off), End: posAt(src, end)}
	return &Error{Diagnostics: hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Text not in Unicode normal form C",
		Detail: fmt.Sprintf("%+q (%s) would be read as %+q (%s): the HCL parser changes text to normal form C (NFC), so it would reach Nomad changed; save the file in NFC",
			seg, codePoints(seg), norm.NFC.Bytes(seg), codePoints(norm.NFC.Bytes(seg))),
		Subject: &r}}}
}

// posAt is the position of byte off of src as the HCL lexer counts it: a
// line per "\n" (alone or after "\r", either way a grapheme cluster of
// its own), a column per grapheme cluster (textseg v15, as HCL's lexer
// uses before Go 1.27). Linear, and it scans only off's line by clusters
// (hcl.RangeScanner, which runs a bufio.Scanner over its token, took
// minutes on a prefix of 80 KB).
func posAt(src []byte, off int) hcl.Pos {
	lineStart := bytes.LastIndexByte(src[:off], '\n') + 1
	p := hcl.Pos{Line: 1 + bytes.Count(src[:lineStart], []byte{'\n'}), Column: 1, Byte: off}
	for b := src[lineStart:off]; len(b) > 0; p.Column++ {
		n, _, _ := textseg.ScanGraphemeClusters(b, true)
		if n <= 0 {
			n = 1 // not expected: a byte, then
		}
		b = b[min(n, len(b)):]
	}
	return p
}

// codePoints lists b's code points, "U+0065 U+0301".
func codePoints(b []byte) string {
	var parts []string
	for _, r := range string(b) {
		parts = append(parts, fmt.Sprintf("%U", r))
	}
	return strings.Join(parts, " ")
}

// endsOperand reports whether a token of type t can end an operand, so
// that a bracket after it indexes or splats the operand rather than
// opening a tuple.
func endsOperand(t hclsyntax.TokenType) bool {
	switch t {
	case hclsyntax.TokenIdent, hclsyntax.TokenNumberLit, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCBrace,
		hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc, hclsyntax.TokenStar:
		return true
	}
	return false
}

func parse(filename string, src []byte, ctx *hcl.EvalContext) ([]Cron, error) {
	if len(src) > MaxFileBytes {
		return nil, fmt.Errorf("cronfile: %s is larger than %d bytes", filename, MaxFileBytes)
	}
	if err := checkNFC(filename, src); err != nil {
		return nil, err
	}
	if err := checkShape(filename, src); err != nil {
		return nil, err
	}
	f, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		return nil, &Error{Diagnostics: diags}
	}
	content, diags := f.Body.Content(fileSchema)
	if diags.HasErrors() {
		return nil, &Error{Diagnostics: diags}
	}
	p := parser{ctx: ctx, src: src}
	if len(content.Blocks) == 0 {
		p.fail(&hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos}, "No cron block", `the file defines no job; write cron "<name>" { ... }`)
	}
	if len(content.Blocks) > MaxCrons {
		r := content.Blocks[MaxCrons].DefRange
		p.fail(&r, "Too many cron blocks", fmt.Sprintf("a file holds at most %d", MaxCrons))
		return nil, &Error{Diagnostics: p.diags}
	}
	seen := map[string]hcl.Range{}
	var out []Cron
	for _, b := range content.Blocks {
		c, ok := p.cron(b)
		if !ok {
			continue
		}
		if first, dup := seen[c.Name]; dup {
			p.fail(b.LabelRanges[0].Ptr(), "Duplicate cron name", fmt.Sprintf("%q is defined already at line %d", c.Name, first.Start.Line))
			continue
		}
		seen[c.Name] = b.DefRange
		out = append(out, c)
	}
	if p.diags.HasErrors() {
		return nil, &Error{Diagnostics: p.diags}
	}
	return out, nil
}

var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "cron", LabelNames: []string{"name"}}},
}

var cronSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "schedule", Required: true},
		{Name: "time_zone"},
		{Name: "concurrency"},
		{Name: "catchup_window"},
		{Name: "delivery"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "nomad"}},
}

var nomadSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "job", Required: true},
		{Name: "namespace"},
		{Name: "region"},
		{Name: "meta"},
		{Name: "payload"},
	},
}

type parser struct {
	ctx   *hcl.EvalContext
	src   []byte // the file, for the text of what it writes
	diags hcl.Diagnostics
}

func (p *parser) fail(at *hcl.Range, summary, detail string) {
	p.diags = append(p.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: at})
}

func (p *parser) cron(b *hcl.Block) (Cron, bool) {
	c := Cron{Name: b.Labels[0], Range: b.DefRange}
	errs := len(p.diags)
	if err := state.ValidName(c.Name); err != nil {
		p.fail(b.LabelRanges[0].Ptr(), "Invalid cron name", trimInvalid(err))
	} else if err := api.CheckPathName(c.Name); err != nil {
		// As the API refuses it (found in review: `job validate`
		// passed a file that `job run` then failed).
		p.fail(b.LabelRanges[0].Ptr(), "Invalid cron name", err.Error())
	}
	content, diags := b.Body.Content(cronSchema)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() {
		return c, false
	}
	spec := &c.Spec
	spec.Schedule, _ = p.text(content.Attributes["schedule"])
	if a := content.Attributes["time_zone"]; a != nil {
		tz, _ := p.text(a)
		spec.TimeZone = state.WrittenZone(tz)
	}
	if a := content.Attributes["concurrency"]; a != nil {
		v, ok := p.text(a)
		switch state.Concurrency(v) {
		case state.ConcurrencyAllow, state.ConcurrencyForbid, state.ConcurrencyReplace:
			spec.Concurrency = state.Concurrency(v)
		default:
			if ok {
				p.fail(a.Expr.Range().Ptr(), "Invalid concurrency", fmt.Sprintf("%q is not allow, forbid or replace", v))
			}
		}
	}
	if a := content.Attributes["catchup_window"]; a != nil {
		if v, ok := p.text(a); ok {
			d, err := time.ParseDuration(v)
			switch {
			case err != nil:
				p.fail(a.Expr.Range().Ptr(), "Invalid catch-up window", fmt.Sprintf("%q is not a duration such as \"10m\" or \"1h30m\"", v))
			case d < state.MinCatchupWindow || d > state.MaxCatchupWindow:
				p.fail(a.Expr.Range().Ptr(), "Invalid catch-up window", fmt.Sprintf("%s is outside [%s, %s]: a launch later than its window is skipped, and launches start up to seconds late after a failover", d, state.MinCatchupWindow, state.MaxCatchupWindow))
			default:
				spec.CatchupWindow = d
			}
		}
	}
	if a := content.Attributes["delivery"]; a != nil {
		switch v, ok := p.text(a); {
		case !ok:
		case v == "at-most-once":
		case v == "at-least-once":
			spec.AtLeastOnce = true
		default:
			p.fail(a.Expr.Range().Ptr(), "Invalid delivery", fmt.Sprintf("%q is not at-most-once (the default: a launch Nomad may have forgotten is recorded unknown) or at-least-once (it is launched again, and may run twice)", v))
		}
	}
	switch n := len(content.Blocks); {
	case n == 0:
		p.fail(b.DefRange.Ptr(), "Missing nomad block", "a cron job needs a nomad { job = \"<parameterized job>\" } block saying what it dispatches")
	case n > 1:
		p.fail(content.Blocks[1].DefRange.Ptr(), "Duplicate nomad block", fmt.Sprintf("a cron job has one; the first is at line %d", content.Blocks[0].DefRange.Start.Line))
	default:
		p.nomad(content.Blocks[0], spec)
	}
	if len(p.diags) > errs {
		return c, false
	}
	// The schedule is checked here, with the job's name (? hashes it) and
	// zone, for an error that points at it.
	s, err := schedule.Parse(spec.Schedule, schedule.Options{JobName: c.Name, TimeZone: spec.TimeZone})
	if err != nil {
		at := content.Attributes["schedule"].Expr.Range().Ptr()
		if ta := content.Attributes["time_zone"]; ta != nil && isZoneError(err) {
			at = ta.Expr.Range().Ptr()
		}
		p.fail(at, "Invalid schedule", err.Error())
		return c, false
	}
	c.Resolved = s.Resolved()
	// Everything else the state checks, as it will check it.
	if err := spec.Validate(c.Name); err != nil {
		p.fail(b.DefRange.Ptr(), "Invalid cron job", trimInvalid(err))
		return c, false
	}
	return c, true
}

func (p *parser) nomad(b *hcl.Block, spec *state.JobSpec) {
	content, diags := b.Body.Content(nomadSchema)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() {
		return
	}
	spec.NomadJob, _ = p.text(content.Attributes["job"])
	if a := content.Attributes["namespace"]; a != nil {
		spec.Namespace, _ = p.text(a)
		if spec.Namespace == "*" {
			p.fail(a.Expr.Range().Ptr(), "Invalid namespace", state.ErrWildcardNamespace.Error())
		}
	}
	if a := content.Attributes["region"]; a != nil {
		spec.Region, _ = p.text(a)
	}
	if a := content.Attributes["meta"]; a != nil {
		spec.Meta = p.meta(a)
	}
	if a := content.Attributes["payload"]; a != nil {
		if v, ok := p.text(a); ok && !p.duplicateKeys(a.Expr, "Duplicate key") {
			if len(v) > state.MaxPayloadBytes {
				p.fail(a.Expr.Range().Ptr(), "Payload too large", fmt.Sprintf("%d bytes; Nomad takes at most %d", len(v), state.MaxPayloadBytes))
			} else if v != "" {
				spec.Payload = []byte(v)
			}
		}
	}
	target := state.Target{NomadJob: spec.NomadJob, Namespace: spec.Namespace, Region: spec.Region}
	if err := (state.JobSpec{Schedule: "@daily", NomadJob: target.NomadJob, Namespace: target.Namespace, Region: target.Region}).Validate("x"); err != nil {
		p.fail(b.DefRange.Ptr(), "Invalid nomad block", trimInvalid(err))
	}
}

// text evaluates a to a string.
func (p *parser) text(a *hcl.Attribute) (string, bool) {
	v, diags := a.Expr.Value(p.ctx)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() {
		return "", false
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil || s.IsNull() || !s.IsKnown() {
		p.fail(a.Expr.Range().Ptr(), "Invalid value for "+a.Name, "a string is required")
		return "", false
	}
	if p.numberChanged(a.Expr, v) {
		return "", false
	}
	return s.AsString(), true
}

// meta evaluates a to a map of strings.
func (p *parser) meta(a *hcl.Attribute) map[string]string {
	v, diags := a.Expr.Value(p.ctx)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() {
		return nil
	}
	if p.duplicateKeys(a.Expr, "Duplicate meta key") || p.numbersChanged(a.Expr) {
		return nil
	}
	m, err := convert.Convert(v, cty.Map(cty.String))
	if err != nil || m.IsNull() || !m.IsWhollyKnown() {
		p.fail(a.Expr.Range().Ptr(), "Invalid meta", "meta is a map of strings, such as { kind = \"nightly\" }")
		return nil
	}
	out := map[string]string{}
	for k, v := range m.AsValueMap() {
		if v.IsNull() {
			p.fail(a.Expr.Range().Ptr(), "Invalid meta", fmt.Sprintf("meta %q is null", k))
			continue
		}
		out[k] = v.AsString()
	}
	if len(out) == 0 {
		return nil
	}
	for _, k := range sortedKeys(out) {
		if strings.HasPrefix(k, state.ReservedMetaPrefix) {
			p.fail(a.Expr.Range().Ptr(), "Reserved meta key", fmt.Sprintf("%q: keys starting with %s are set by paxcron on every dispatch", k, state.ReservedMetaPrefix))
		}
	}
	return out
}

// duplicateKeys reports each key that an object constructor ({ k = v })
// in expr sets twice, as summary: HCL keeps the last value without a
// word, so the first was dropped silently (found in review). The keys
// evaluated without error already, in Value.
func (p *parser) duplicateKeys(expr hcl.Expression, summary string) bool {
	node, ok := expr.(hclsyntax.Node)
	if !ok {
		return false
	}
	dup := false
	hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
		obj, ok := n.(*hclsyntax.ObjectConsExpr)
		if !ok {
			return nil
		}
		seen := map[string]hcl.Range{}
		for _, item := range obj.Items {
			kv, diags := item.KeyExpr.Value(p.ctx)
			if diags.HasErrors() || !kv.IsKnown() || kv.IsNull() {
				continue
			}
			k, err := convert.Convert(kv, cty.String)
			if err != nil || k.IsNull() {
				continue
			}
			if first, ok := seen[k.AsString()]; ok {
				p.fail(item.KeyExpr.Range().Ptr(), summary, fmt.Sprintf("%q is set already at line %d", k.AsString(), first.Start.Line))
				dup = true
				continue
			}
			seen[k.AsString()] = item.KeyExpr.Range()
		}
		return nil
	})
	return dup
}

// numbersChanged reports each meta value written as a number whose text
// is not the string it becomes (see numberChanged).
func (p *parser) numbersChanged(expr hcl.Expression) bool {
	obj, ok := expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return false
	}
	changed := false
	for _, item := range obj.Items {
		v, diags := item.ValueExpr.Value(p.ctx)
		if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.Number {
			continue
		}
		if p.numberChanged(item.ValueExpr, v) {
			changed = true
		}
	}
	return changed
}

// numberChanged reports a value v written as a number by expr whose text
// is not the string it becomes (hcltext.NumberChanged): `version = 1.10`
// in meta reached Nomad as "1.1", and `job = 1.50` dispatched job "1.5",
// without a word (found in review), as text not in NFC would have
// reached it changed.
func (p *parser) numberChanged(expr hcl.Expression, v cty.Value) bool {
	written, str, changed := hcltext.NumberChanged(p.src, expr, v)
	if !changed {
		return false
	}
	r := expr.Range()
	p.fail(&r, "Number changed", fmt.Sprintf("%s would reach Nomad as %q, HCL's shortest form of the number: quote it (\"%s\") to send it as written", written, str, written))
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func isZoneError(err error) bool {
	var pe *schedule.ParseError
	return errors.As(err, &pe) && pe.Field == "time zone"
}

// trimInvalid drops the state package's "state: invalid command: "
// prefix, which means nothing to someone writing a file. (It cut at the
// first ": ", after "state", and left "invalid command: " in; found in
// review.)
func trimInvalid(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, state.ErrInvalid.Error()+": "); ok {
		return rest
	}
	return msg
}

// evalContext offers file (file() relative to a folder, or its refusal),
// and jsonencode().
func evalContext(file function.Function) *hcl.EvalContext {
	return &hcl.EvalContext{Functions: map[string]function.Function{
		"file":       file,
		"jsonencode": stdlib.JSONEncodeFunc,
	}}
}

// noFileFunc is file() in a file submitted to a server.
var noFileFunc = function.New(&function.Spec{
	Params: []function.Parameter{{Name: "path", Type: cty.String}},
	Type:   function.StaticReturnType(cty.String),
	Impl: func([]cty.Value, cty.Type) (cty.Value, error) {
		return cty.NilVal, errors.New("file() cannot be used in a file sent to the server, which would read its own disk: submit with `paxcron job run FILE`, which reads the file on this machine")
	},
})

func fileFunc(dir string) function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{{Name: "path", Type: cty.String}},
		Type:   function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			path := args[0].AsString()
			if !filepath.IsAbs(path) {
				path = filepath.Join(dir, path)
			}
			f, err := os.Open(path)
			if err != nil {
				return cty.NilVal, err
			}
			defer f.Close()
			b, err := io.ReadAll(io.LimitReader(f, state.MaxPayloadBytes+1))
			if err != nil {
				return cty.NilVal, err
			}
			if len(b) > state.MaxPayloadBytes {
				return cty.NilVal, fmt.Errorf("%s is larger than %d bytes, Nomad's payload limit", path, state.MaxPayloadBytes)
			}
			// An HCL string is UTF-8 in Unicode normal form C: a file that
			// is not would reach Nomad changed, so it is refused.
			v := cty.StringVal(string(b))
			if !utf8.Valid(b) || v.AsString() != string(b) {
				return cty.NilVal, fmt.Errorf("%s is not UTF-8 text in Unicode normal form C, so it cannot be a payload unchanged", path)
			}
			return v, nil
		},
	})
}

// Format writes crons as cron blocks that Parse reads back to the same
// names and specs (a payload only if it is UTF-8 text in normal form C,
// else Format fails). Defaults are left out.
func Format(crons []Cron) ([]byte, error) {
	f := hclwrite.NewEmptyFile()
	body := f.Body()
	for i, c := range crons {
		if i > 0 {
			body.AppendNewline()
		}
		b := body.AppendNewBlock("cron", []string{c.Name}).Body()
		s := c.Spec
		b.SetAttributeValue("schedule", cty.StringVal(s.Schedule))
		if s.TimeZone != "" {
			b.SetAttributeValue("time_zone", cty.StringVal(s.TimeZone))
		}
		if s.Concurrency != "" && s.Concurrency != state.ConcurrencyAllow {
			b.SetAttributeValue("concurrency", cty.StringVal(string(s.Concurrency)))
		}
		if s.CatchupWindow != 0 && s.CatchupWindow != state.DefaultCatchupWindow {
			b.SetAttributeValue("catchup_window", cty.StringVal(s.CatchupWindow.String()))
		}
		if s.AtLeastOnce {
			b.SetAttributeValue("delivery", cty.StringVal("at-least-once"))
		}
		n := b.AppendNewBlock("nomad", nil).Body()
		n.SetAttributeValue("job", cty.StringVal(s.NomadJob))
		if s.Namespace != "" {
			n.SetAttributeValue("namespace", cty.StringVal(s.Namespace))
		}
		if s.Region != "" {
			n.SetAttributeValue("region", cty.StringVal(s.Region))
		}
		if len(s.Meta) > 0 {
			// Keys quoted: hclwrite writes an identifier bare, and "for"
			// or "null" bare is no key to Parse (found in review).
			var meta []hclwrite.ObjectAttrTokens
			for _, k := range sortedKeys(s.Meta) {
				meta = append(meta, hclwrite.ObjectAttrTokens{Name: hclwrite.TokensForValue(cty.StringVal(k)), Value: hclwrite.TokensForValue(cty.StringVal(s.Meta[k]))})
			}
			n.SetAttributeRaw("meta", hclwrite.TokensForObject(meta))
		}
		if len(s.Payload) > 0 {
			if !utf8.Valid(s.Payload) || cty.StringVal(string(s.Payload)).AsString() != string(s.Payload) {
				return nil, fmt.Errorf("cronfile: cron %q: its payload is not UTF-8 text in normal form C; write it to a file and use file()", c.Name)
			}
			n.SetAttributeValue("payload", cty.StringVal(string(s.Payload)))
		}
	}
	return f.Bytes(), nil
}
