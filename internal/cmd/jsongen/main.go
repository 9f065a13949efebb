// Command jsongen writes the JSON encoders and decoders of the hot path's wire
// types (events.Job and the outcomes a worker publishes, workflow.Log), so that a
// field added to one of them is a `go generate` away rather than a hand edit in
// several places. It reads the package's source (go/ast: struct fields and json
// tags) and writes zz_generated_json.go beside it:
//
//   - for each type named by -encode, AppendJSON and JSONSize: append-style
//     encoders that write byte for byte what json.Marshal writes, built on
//     internal/jsonenc (a *T in the list gets a pointer receiver that writes null
//     for nil);
//   - for each type named by -decode, decodeJSON: a decoder on internal/jsondec's
//     tokenizer that decodes exactly as encoding/json would, or reports false and
//     leaves the document to internal/jsonx; and jsonIsZero, for the caller to
//     check that it decodes into a zero value (encoding/json merges otherwise).
//
// The struct types these reach in the same package get the same, unexported. A
// field of a type it does not know (another package's struct, a type with its own
// MarshalJSON, an interface) is handed to jsonenc.AppendValue and jsondec.Other,
// which defer to encoding/json and jsonx. It is run by the //go:generate lines of
// the packages (make generate); a test fails when a checked-in file is stale.
//
// Usage (in the package's directory):
//
//	go run ../internal/cmd/jsongen -encode Job,*Log -decode Job
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Output is the name of the file jsongen writes.
const Output = "zz_generated_json.go"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "jsongen:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	out, err := Generate(".", args)
	if err != nil {
		return err
	}
	return os.WriteFile(Output, out, 0o644)
}

// Generate returns the file jsongen writes for the package in dir, given its
// arguments.
func Generate(dir string, args []string) ([]byte, error) {
	fs := flag.NewFlagSet("jsongen", flag.ContinueOnError)
	enc := fs.String("encode", "", "comma-separated types to write AppendJSON and JSONSize for (*T: pointer receiver, nil is null)")
	dec := fs.String("decode", "", "comma-separated types to write a decoder for")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	p, err := load(dir)
	if err != nil {
		return nil, err
	}
	g := &gen{pkg: p, imports: map[string]string{}, args: args}
	for _, name := range split(*enc) {
		ptr := strings.HasPrefix(name, "*")
		name = strings.TrimPrefix(name, "*")
		if err := g.addEncode(name); err != nil {
			return nil, err
		}
		g.encRoots = append(g.encRoots, root{name, ptr})
	}
	for _, name := range split(*dec) {
		if err := g.addDecode(name); err != nil {
			return nil, err
		}
	}
	return g.file()
}

func split(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

type root struct {
	name string
	ptr  bool
}

// pkg is the parsed source of a package: its type declarations, and which
// types have methods that encoding/json calls.
type pkg struct {
	name    string
	dir     string
	types   map[string]*typeDecl
	custom  map[string]bool // types with MarshalJSON, MarshalText, UnmarshalJSON or UnmarshalText
	modPath string          // the module's path and directory, to read the module's other packages
	modDir  string
	others  map[string]*pkg // by import path
}

type typeDecl struct {
	name    string
	expr    ast.Expr
	imports map[string]string // the declaring file's imports: name -> path
}

func load(dir string) (*pkg, error) {
	modDir, modPath, err := findModule(dir)
	if err != nil {
		return nil, err
	}
	return loadDir(dir, modDir, modPath, map[string]*pkg{})
}

func findModule(dir string) (string, string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	for d := abs; ; d = filepath.Dir(d) {
		data, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil {
			for line := range strings.SplitSeq(string(data), "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return d, strings.Trim(strings.TrimSpace(rest), `"`), nil
				}
			}
			return "", "", fmt.Errorf("%s: no module line", filepath.Join(d, "go.mod"))
		}
		if filepath.Dir(d) == d {
			return "", "", fmt.Errorf("no go.mod above %s", abs)
		}
	}
}

func loadDir(dir, modDir, modPath string, others map[string]*pkg) (*pkg, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	p := &pkg{dir: dir, types: map[string]*typeDecl{}, custom: map[string]bool{}, modPath: modPath, modDir: modDir, others: others}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == Output {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		if !buildable(f) {
			continue
		}
		p.name = f.Name.Name
		imports := map[string]string{}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			name := filepath.Base(path)
			if im.Name != nil {
				name = im.Name.Name
			} else if v := strings.TrimPrefix(name, "v"); v != name && v != "" && strings.Trim(v, "0123456789") == "" {
				name = filepath.Base(filepath.Dir(path)) // .../json/v2
			}
			imports[name] = path
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.TypeParams == nil {
						p.types[ts.Name.Name] = &typeDecl{name: ts.Name.Name, expr: ts.Type, imports: imports}
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					continue
				}
				switch d.Name.Name {
				case "MarshalJSON", "MarshalText", "UnmarshalJSON", "UnmarshalText", "MarshalJSONTo", "UnmarshalJSONFrom":
					p.custom[recvName(d.Recv.List[0].Type)] = true
				}
			}
		}
	}
	return p, nil
}

// buildable: the file has no build constraint (the packages jsongen reads have
// none on the files that declare wire types).
func buildable(f *ast.File) bool {
	for _, c := range f.Comments {
		if c.Pos() > f.Package {
			break
		}
		for _, l := range c.List {
			if strings.HasPrefix(l.Text, "//go:build") {
				return false
			}
		}
	}
	return true
}

func recvName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// other returns the package of the module at import path, nil outside the module.
func (p *pkg) other(path string) *pkg {
	rel, ok := strings.CutPrefix(path, p.modPath+"/")
	if !ok {
		return nil
	}
	if o, ok := p.others[path]; ok {
		return o
	}
	o, err := loadDir(filepath.Join(p.modDir, filepath.FromSlash(rel)), p.modDir, p.modPath, p.others)
	if err != nil {
		o = nil
	}
	p.others[path] = o
	return o
}

type kind int

const (
	kString kind = iota
	kBool
	kInt
	kUint
	kFloat
	kRaw    // json.RawMessage
	kTime   // time.Time
	kStruct // a struct type of this package, generated too
	kPtr
	kSlice
	kMap    // string keys
	kAnyMap // map[string]any
	kAny    // an interface
	kOther  // anything else: encoding/json's business
)

// typ is a field's type as the generated code sees it.
type typ struct {
	kind  kind
	expr  string // as the source writes it
	named bool   // a named type whose underlying type is kind's (a conversion is needed)
	bits  int    // of an int, uint or float
	name  string // kStruct: the type's name
	elem  *typ   // kPtr, kSlice, kMap
}

type field struct {
	name, key        string
	omitEmpty, omitZ bool
	typ              *typ
}

type structType struct {
	name   string
	fields []field
}

type gen struct {
	pkg      *pkg
	args     []string
	encRoots []root
	enc      []*structType // in the order first reached
	dec      []*structType
	imports  map[string]string // name -> path, of packages the generated code names
	buf      bytes.Buffer
	tmp      int
}

func (g *gen) addEncode(name string) error {
	return g.reach(name, &g.enc)
}

func (g *gen) addDecode(name string) error {
	return g.reach(name, &g.dec)
}

// reach adds the struct type name, and every struct type of the package its
// fields reach, to set.
func (g *gen) reach(name string, set *[]*structType) error {
	if slices.ContainsFunc(*set, func(s *structType) bool { return s.name == name }) {
		return nil
	}
	st, err := g.structType(name)
	if err != nil {
		return err
	}
	*set = append(*set, st)
	var walk func(t *typ) error
	walk = func(t *typ) error {
		switch t.kind {
		case kStruct:
			return g.reach(t.name, set)
		case kPtr, kSlice, kMap:
			return walk(t.elem)
		}
		return nil
	}
	for _, f := range st.fields {
		if err := walk(f.typ); err != nil {
			return err
		}
	}
	return nil
}

func (g *gen) structType(name string) (*structType, error) {
	td, ok := g.pkg.types[name]
	if !ok {
		return nil, fmt.Errorf("type %s not found in %s", name, g.pkg.dir)
	}
	if g.pkg.custom[name] {
		return nil, fmt.Errorf("type %s has its own JSON methods", name)
	}
	s, ok := td.expr.(*ast.StructType)
	if !ok {
		return nil, fmt.Errorf("type %s is not a struct", name)
	}
	st := &structType{name: name}
	for _, f := range s.Fields.List {
		if len(f.Names) == 0 {
			return nil, fmt.Errorf("%s: embedded fields are not supported", name)
		}
		tag := ""
		if f.Tag != nil {
			raw, _ := strconv.Unquote(f.Tag.Value)
			tag = reflect.StructTag(raw).Get("json")
		}
		for _, n := range f.Names {
			if !n.IsExported() || tag == "-" {
				continue
			}
			key, opts, _ := strings.Cut(tag, ",")
			if key == "" {
				key = n.Name
			}
			fl := field{name: n.Name, key: key}
			for o := range strings.SplitSeq(opts, ",") {
				switch o {
				case "":
				case "omitempty":
					fl.omitEmpty = true
				case "omitzero":
					fl.omitZ = true
				default:
					return nil, fmt.Errorf("%s.%s: tag option %q is not supported", name, n.Name, o)
				}
			}
			if !validKey(key) {
				return nil, fmt.Errorf("%s.%s: key %q needs escaping, which is not supported", name, n.Name, key)
			}
			t, err := g.resolve(f.Type, td.imports, g.pkg)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", name, n.Name, err)
			}
			if fl.omitZ && !slices.Contains([]kind{kString, kBool, kInt, kUint, kFloat, kRaw, kTime, kPtr, kSlice, kMap, kAnyMap, kAny}, t.kind) {
				return nil, fmt.Errorf("%s.%s: omitzero on %s is not supported", name, n.Name, t.expr)
			}
			if (fl.omitEmpty || fl.omitZ) && t.kind == kOther {
				return nil, fmt.Errorf("%s.%s: omitempty or omitzero on %s, a type jsongen does not read, is not supported", name, n.Name, t.expr)
			}
			fl.typ = t
			st.fields = append(st.fields, fl)
		}
	}
	if len(st.fields) > 63 {
		return nil, fmt.Errorf("%s: more than 63 fields", name)
	}
	return st, nil
}

// validKey: the key is written as it is, quoted, by encoding/json (no escapes,
// none of the characters it escapes for HTML).
func validKey(k string) bool {
	for _, c := range k {
		if c < 0x20 || c >= 0x7f || strings.ContainsRune("\"\\<>&`", c) {
			return false
		}
	}
	return true
}

var basics = map[string]struct {
	kind kind
	bits int
}{
	"string": {kString, 0}, "bool": {kBool, 0},
	"int": {kInt, 64}, "int8": {kInt, 8}, "int16": {kInt, 16}, "int32": {kInt, 32}, "int64": {kInt, 64},
	"uint": {kUint, 64}, "uint8": {kUint, 8}, "byte": {kUint, 8}, "rune": {kInt, 32}, "uint16": {kUint, 16}, "uint32": {kUint, 32}, "uint64": {kUint, 64},
	"float32": {kFloat, 32}, "float64": {kFloat, 64},
}

// resolve makes the typ of e, written in a file of p with imports.
func (g *gen) resolve(e ast.Expr, imports map[string]string, p *pkg) (*typ, error) {
	expr := exprString(e)
	switch e := e.(type) {
	case *ast.Ident:
		if b, ok := basics[e.Name]; ok {
			return &typ{kind: b.kind, bits: b.bits, expr: expr}, nil
		}
		if e.Name == "any" {
			return &typ{kind: kAny, expr: expr}, nil
		}
		if p != g.pkg {
			return nil, fmt.Errorf("type %s of another package", e.Name)
		}
		td, ok := p.types[e.Name]
		if !ok || p.custom[e.Name] {
			return &typ{kind: kOther, expr: expr}, nil
		}
		if _, ok := td.expr.(*ast.StructType); ok {
			return &typ{kind: kStruct, name: e.Name, expr: expr}, nil
		}
		return g.named(td, expr, p)
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return nil, fmt.Errorf("unexpected type %s", expr)
		}
		path := imports[x.Name]
		g.imports[x.Name] = path
		switch path + "." + e.Sel.Name {
		case "encoding/json.RawMessage":
			return &typ{kind: kRaw, expr: expr}, nil
		case "time.Time":
			return &typ{kind: kTime, expr: expr}, nil
		}
		o := g.pkg.other(path)
		if o == nil || o.custom[e.Sel.Name] || o.types[e.Sel.Name] == nil {
			return &typ{kind: kOther, expr: expr}, nil
		}
		td := o.types[e.Sel.Name]
		if _, ok := td.expr.(*ast.StructType); ok {
			return &typ{kind: kOther, expr: expr}, nil
		}
		t, err := g.named(td, expr, o)
		if err != nil || t.kind > kFloat {
			return &typ{kind: kOther, expr: expr}, nil // only another package's named basic types are read through
		}
		return t, nil
	case *ast.StarExpr:
		el, err := g.resolve(e.X, imports, p)
		if err != nil {
			return nil, err
		}
		if el.kind == kPtr {
			return &typ{kind: kOther, expr: expr}, nil
		}
		return &typ{kind: kPtr, elem: el, expr: expr}, nil
	case *ast.ArrayType:
		el, err := g.resolve(e.Elt, imports, p)
		if err != nil {
			return nil, err
		}
		if e.Len != nil || el.kind == kUint && el.bits == 8 {
			return &typ{kind: kOther, expr: expr}, nil // arrays; []byte is base64
		}
		return &typ{kind: kSlice, elem: el, expr: expr}, nil
	case *ast.MapType:
		if k, ok := e.Key.(*ast.Ident); !ok || k.Name != "string" {
			return &typ{kind: kOther, expr: expr}, nil
		}
		el, err := g.resolve(e.Value, imports, p)
		if err != nil {
			return nil, err
		}
		if el.kind == kAny && !el.named {
			return &typ{kind: kAnyMap, expr: expr}, nil
		}
		return &typ{kind: kMap, elem: el, expr: expr}, nil
	case *ast.InterfaceType:
		if e.Methods == nil || len(e.Methods.List) == 0 {
			return &typ{kind: kAny, expr: expr}, nil
		}
		return &typ{kind: kOther, expr: expr}, nil
	}
	return &typ{kind: kOther, expr: expr}, nil
}

// named resolves a named non-struct type declared in p as td.
func (g *gen) named(td *typeDecl, expr string, p *pkg) (*typ, error) {
	u, err := g.resolve(td.expr, td.imports, p)
	if err != nil {
		return nil, err
	}
	switch u.kind {
	case kString, kBool, kInt, kUint, kFloat:
		return &typ{kind: u.kind, bits: u.bits, named: true, expr: expr}, nil
	}
	return &typ{kind: kOther, expr: expr}, nil // named slices, maps, ...: left to encoding/json
}

func exprString(e ast.Expr) string {
	var b bytes.Buffer
	if err := format.Node(&b, token.NewFileSet(), e); err != nil {
		panic(err)
	}
	return b.String()
}

func (g *gen) p(format string, args ...any) {
	fmt.Fprintf(&g.buf, format, args...)
	g.buf.WriteByte('\n')
}

func (g *gen) file() ([]byte, error) {
	for _, s := range g.enc {
		g.encoder(s)
	}
	for _, r := range g.encRoots {
		g.encodeRoot(r)
	}
	for _, s := range g.enc {
		g.sizer(s)
	}
	for _, s := range g.dec {
		g.decoder(s)
		g.isZero(s)
	}
	body := g.buf.Bytes()
	used, err := selectors(body)
	if err != nil {
		return nil, fmt.Errorf("the generated code does not parse: %w\n%s", err, body)
	}
	imports := map[string]string{}
	for name, path := range g.imports {
		if used[name] {
			imports[name] = path
		}
	}
	for _, path := range []string{"slices", "strconv", "github.com/skillbus/skillbus/internal/jsonenc", "github.com/skillbus/skillbus/internal/jsondec"} {
		if used[filepath.Base(path)] {
			imports[filepath.Base(path)] = path
		}
	}
	names := make([]string, 0, len(imports))
	for n := range imports {
		names = append(names, n)
	}
	// The standard library's first, as goimports groups them.
	slices.SortFunc(names, func(a, b string) int {
		da, db := strings.Contains(imports[a], "."), strings.Contains(imports[b], ".")
		if da != db {
			if db {
				return -1
			}
			return 1
		}
		return strings.Compare(imports[a], imports[b])
	})
	var head bytes.Buffer
	fmt.Fprintf(&head, "// Code generated by jsongen %s. DO NOT EDIT.\n\n", strings.Join(g.args, " "))
	fmt.Fprintf(&head, "package %s\n\nimport (\n", g.pkg.name)
	std := true
	for _, n := range names {
		if std && strings.Contains(imports[n], ".") {
			head.WriteString("\n")
			std = false
		}
		if filepath.Base(imports[n]) == n {
			fmt.Fprintf(&head, "\t%q\n", imports[n])
		} else {
			fmt.Fprintf(&head, "\t%s %q\n", n, imports[n])
		}
	}
	head.WriteString(")\n\n")
	head.Write(body)
	out, err := format.Source(head.Bytes())
	if err != nil {
		return nil, fmt.Errorf("formatting the generated code: %w\n%s", err, head.Bytes())
	}
	return out, nil
}

// selectors returns the names that code (declarations) qualifies: the packages
// it uses.
func selectors(code []byte) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", append([]byte("package p\n"), code...), parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := s.X.(*ast.Ident); ok {
				used[id.Name] = true
			}
		}
		return true
	})
	return used, nil
}

func (g *gen) name(prefix string) string {
	g.tmp++
	return fmt.Sprintf("%s%d", prefix, g.tmp)
}

func (g *gen) encodeRoot(r root) {
	recv := "v " + r.name
	if r.ptr {
		recv = "v *" + r.name
	}
	g.p("// AppendJSON appends v encoded as json.Marshal encodes it. On error it returns b as it was and the error json.Marshal would give.")
	g.p("func (%s) AppendJSON(b []byte) ([]byte, error) {", recv)
	if r.ptr {
		g.p("if v == nil { return append(b, \"null\"...), nil }")
	}
	g.p("n := len(b)")
	g.p("b, err := v.appendJSON(slices.Grow(b, v.jsonSize()))")
	g.p("if err != nil { return b[:n], err }")
	g.p("return b, nil")
	g.p("}\n")
	g.p("// JSONSize is about how many bytes AppendJSON writes for v, so that a caller appending it after something of its own can make its buffer once.")
	g.p("func (v *%s) JSONSize() int { return v.jsonSize() }\n", r.name)
}

// encoder writes appendJSON for s.
func (g *gen) encoder(s *structType) {
	var body bytes.Buffer
	saved := g.buf
	g.buf = bytes.Buffer{}
	// Members are written with a leading comma; while every member so far may be
	// left out, the first one written turns its comma into the brace.
	dynamic := len(s.fields) > 0 && omittable(s.fields[0])
	if dynamic {
		g.p("start := len(b)")
	}
	for i, f := range s.fields {
		key := strconv.Quote(f.key) + ":"
		if i == 0 && !dynamic {
			key = "{" + key
		} else {
			key = "," + key
		}
		cond := omitCond(f)
		if cond != "" {
			g.p("if %s {", cond)
		}
		if f.typ.kind == kBool && f.omitEmpty && !f.typ.named {
			g.p("b = append(b, `%strue`...)", key)
		} else {
			g.p("b = append(b, `%s`...)", key)
			g.appendValue(f.typ, "v."+f.name, cond != "" && f.omitEmpty)
		}
		if cond != "" {
			g.p("}")
		}
	}
	switch {
	case len(s.fields) == 0:
		g.p("b = append(b, \"{}\"...)")
	case dynamic:
		g.p("if len(b) == start { return append(b, \"{}\"...), nil }")
		g.p("b[start] = '{'")
		g.p("b = append(b, '}')")
	default:
		g.p("b = append(b, '}')")
	}
	body = g.buf
	g.buf = saved
	g.p("func (v *%s) appendJSON(b []byte) ([]byte, error) {", s.name)
	if bytes.Contains(body.Bytes(), []byte("err =")) {
		g.p("var err error")
	}
	g.buf.Write(body.Bytes())
	g.p("return b, nil")
	g.p("}\n")
}

func omittable(f field) bool { return omitCond(f) != "" }

// omitCond is the condition under which f is written, "" for always.
func omitCond(f field) string {
	x := "v." + f.name
	var empty, zero string
	switch f.typ.kind {
	case kString:
		empty, zero = x+` != ""`, x+` != ""`
	case kBool:
		empty, zero = x, x
	case kInt, kUint, kFloat:
		empty, zero = x+" != 0", x+" != 0"
	case kRaw, kSlice, kMap, kAnyMap:
		empty, zero = "len("+x+") != 0", x+" != nil"
	case kPtr, kAny:
		empty, zero = x+" != nil", x+" != nil"
	case kTime:
		zero = "!" + x + ".IsZero()"
	}
	switch {
	case f.omitEmpty && f.omitZ && empty != "" && empty != zero:
		return empty + " && " + zero
	case f.omitEmpty:
		return empty
	case f.omitZ:
		return zero
	}
	return ""
}

// appendValue writes the statements that append x, of type t.
// nonNil: x is known not to be nil (a field written only when not empty).
func (g *gen) appendValue(t *typ, x string, nonNil bool) {
	check := func(call string) { g.p("if b, err = %s; err != nil { return b, err }", call) }
	switch t.kind {
	case kString:
		if t.named {
			x = "string(" + x + ")"
		}
		g.p("b = jsonenc.AppendString(b, %s)", x)
	case kBool:
		g.p("if %s { b = append(b, \"true\"...) } else { b = append(b, \"false\"...) }", x)
	case kInt:
		g.p("b = strconv.AppendInt(b, int64(%s), 10)", x)
	case kUint:
		g.p("b = strconv.AppendUint(b, uint64(%s), 10)", x)
	case kFloat:
		check(fmt.Sprintf("jsonenc.AppendFloat(b, float64(%s), %d)", x, t.bits))
	case kRaw:
		if nonNil {
			check(fmt.Sprintf("jsonenc.AppendRaw(b, %s)", x))
			return
		}
		g.p("if %s == nil { b = append(b, \"null\"...) } else {", x)
		check(fmt.Sprintf("jsonenc.AppendRaw(b, %s)", x))
		g.p("}")
	case kTime:
		check(fmt.Sprintf("jsonenc.AppendTime(b, %s)", x))
	case kStruct:
		check(x + ".appendJSON(b)")
	case kPtr:
		if !nonNil {
			g.p("if %s == nil { b = append(b, \"null\"...) } else {", x)
			defer g.p("}")
		}
		if t.elem.kind == kStruct {
			check(x + ".appendJSON(b)")
		} else {
			g.appendValue(t.elem, "(*"+x+")", false)
		}
	case kSlice:
		if t.elem.kind == kString && !t.elem.named {
			g.p("b = jsonenc.AppendStrings(b, %s)", x)
			return
		}
		i := g.name("i")
		if !nonNil {
			g.p("if %s == nil { b = append(b, \"null\"...) } else {", x)
			defer g.p("}")
		}
		g.p("b = append(b, '[')")
		g.p("for %s := range %s {", i, x)
		g.p("if %s > 0 { b = append(b, ',') }", i)
		g.appendValue(t.elem, x+"["+i+"]", false)
		g.p("}")
		g.p("b = append(b, ']')")
	case kMap:
		i, k, keys, e := g.name("i"), g.name("k"), g.name("keys"), g.name("e")
		if !nonNil {
			g.p("if %s == nil { b = append(b, \"null\"...) } else {", x)
			defer g.p("}")
		}
		g.p("b = append(b, '{')")
		g.p("var %s [8]string", keys)
		g.p("for %s, %s := range jsonenc.SortedKeys(%s[:0], %s) {", i, k, keys, x)
		g.p("if %s > 0 { b = append(b, ',') }", i)
		g.p("b = jsonenc.AppendString(b, %s)", k)
		g.p("b = append(b, ':')")
		g.p("%s := %s[%s]", e, x, k)
		g.appendValue(t.elem, e, false)
		g.p("}")
		g.p("b = append(b, '}')")
	default: // kAnyMap, kAny, kOther
		check(fmt.Sprintf("jsonenc.AppendValue(b, %s)", x))
	}
}

// sizer writes jsonSize for s: about how long its encoding is, so that
// AppendJSON grows its buffer once. Strings count an eighth more for escapes.
func (g *gen) sizer(s *structType) {
	fixed := 2
	var terms []string
	for _, f := range s.fields {
		n, term := g.sizeOf(f.typ, "v."+f.name)
		n += len(f.key) + 4
		cond := omitCond(f)
		switch {
		case cond == "":
			fixed += n
			if term != "" {
				terms = append(terms, term)
			}
		case term == "":
			terms = append(terms, fmt.Sprintf("if %s { n += %d }", cond, n))
		default:
			terms = append(terms, fmt.Sprintf("if %s {\nn += %d\n%s\n}", cond, n, term))
		}
	}
	g.p("func (v *%s) jsonSize() int {", s.name)
	g.p("n := %d", fixed)
	for _, t := range terms {
		g.p("%s", t)
	}
	g.p("return n")
	g.p("}\n")
}

// sizeOf returns a fixed size for a value x of type t, and a statement adding
// what depends on x to n.
func (g *gen) sizeOf(t *typ, x string) (int, string) {
	switch t.kind {
	case kString:
		return 2, fmt.Sprintf("n += len(%[1]s) + len(%[1]s)/8", x)
	case kBool:
		return 5, ""
	case kInt, kUint:
		return 12, ""
	case kFloat:
		return 20, ""
	case kTime:
		return 36, ""
	case kRaw:
		return 4, fmt.Sprintf("n += len(%s)", x)
	case kStruct:
		return 0, fmt.Sprintf("n += %s.jsonSize()", x)
	case kPtr:
		if t.elem.kind == kStruct {
			return 4, fmt.Sprintf("if %[1]s != nil { n += %[1]s.jsonSize() }", x)
		}
		fixed, term := g.sizeOf(t.elem, "(*"+x+")")
		if term == "" {
			return fixed, ""
		}
		return fixed, fmt.Sprintf("if %s != nil { %s }", x, term)
	case kSlice:
		i := g.name("i")
		fixed, term := g.sizeOf(t.elem, x+"["+i+"]")
		if term == "" {
			return 2, fmt.Sprintf("n += %d * len(%s)", fixed+1, x)
		}
		return 2, fmt.Sprintf("n += %d * len(%s)\nfor %s := range %s { %s }", fixed+1, x, i, x, term)
	case kMap:
		k, e := g.name("k"), g.name("e")
		fixed, term := g.sizeOf(t.elem, e)
		if term == "" {
			return 2, fmt.Sprintf("n += %d * len(%s)\nfor %s := range %s { n += len(%s) }", fixed+4, x, k, x, k)
		}
		return 2, fmt.Sprintf("n += %d * len(%s)\nfor %s, %s := range %s { n += len(%s); %s }", fixed+4, x, k, e, x, k, term)
	case kAnyMap:
		return 2, fmt.Sprintf("n += jsonenc.MapSize(%s)", x)
	}
	return 0, fmt.Sprintf("n += jsonenc.ValueSize(%s)", x)
}

// decoder writes decodeJSON for s.
func (g *gen) decoder(s *structType) {
	g.p("// decodeJSON decodes an object into v, zero, exactly as encoding/json would, or reports false (leaving v in any state). A member named skip, if not empty, is checked to be well-formed JSON and left out.")
	g.p("func (v *%s) decodeJSON(d *jsondec.Decoder, skip string) bool {", s.name)
	g.p("var seen uint64")
	g.p("return d.Object(func(k string) bool {")
	g.p("if skip != \"\" && k == skip { return jsondec.Once(&seen, 1<<63) && d.Skip() }")
	g.p("switch k {")
	for i, f := range s.fields {
		g.p("case %q:", f.key)
		g.p("return jsondec.Once(&seen, 1<<%d) && %s", i, g.decodeExpr(f.typ, "v."+f.name, "&v."+f.name))
	}
	g.p("}")
	g.p("return false")
	g.p("})")
	g.p("}\n")
}

// decodeExpr returns the expression that decodes into the value x (whose
// address is p) and reports whether it did. The elements of slices and maps are
// decoded into a closure's result, not through a pointer a closure is given:
// the compiler cannot see where a pointer passed to a function value goes, and
// would put each element on the heap.
func (g *gen) decodeExpr(t *typ, x, p string) string {
	conv := func(to string) string {
		if t.named {
			return "(*" + to + ")(" + p + ")"
		}
		return p
	}
	switch t.kind {
	case kString:
		return "d.Str(" + conv("string") + ")"
	case kBool:
		return "d.Bool(" + conv("bool") + ")"
	case kInt:
		return "jsondec.Int(d, " + p + ")"
	case kUint:
		return "jsondec.Uint(d, " + p + ")"
	case kFloat:
		return "jsondec.Float(d, " + p + ")"
	case kRaw:
		return "d.Raw((*[]byte)(" + p + "))"
	case kStruct:
		if !strings.HasPrefix(p, "&") {
			x = p // a pointer: no need to take the value's address
		}
		return "(d.Null() || " + x + `.decodeJSON(d, ""))`
	case kPtr:
		e := g.name("e")
		return fmt.Sprintf("jsondec.Ptr(d, %s, func(%s *%s) bool { return %s })", p, e, t.elem.expr, g.decodeExpr(t.elem, "(*"+e+")", e))
	case kSlice, kMap:
		e := g.name("e")
		fn := "Slice"
		if t.kind == kMap {
			fn = "Map"
		}
		return fmt.Sprintf("jsondec.%s(d, %s, func() (%s %s, ok bool) {\nok = %s\nreturn\n})", fn, p, e, t.elem.expr, g.decodeExpr(t.elem, e, "&"+e))
	case kAnyMap:
		return "d.AnyMap(" + p + ")"
	case kAny:
		return "d.Any(" + p + ")"
	}
	return "jsondec.Other(d, " + p + ")"
}

// isZero writes jsonIsZero for s: decoding into a zero value is decoding into
// a new one; into anything else encoding/json merges, which only jsonx does.
func (g *gen) isZero(s *structType) {
	var conds []string
	for _, f := range s.fields {
		x := "v." + f.name
		switch f.typ.kind {
		case kString:
			conds = append(conds, x+` == ""`)
		case kBool:
			conds = append(conds, "!"+x)
		case kInt, kUint, kFloat:
			conds = append(conds, x+" == 0")
		case kRaw, kPtr, kSlice, kMap, kAnyMap, kAny:
			conds = append(conds, x+" == nil")
		case kStruct:
			conds = append(conds, x+".jsonIsZero()")
		case kTime:
			conds = append(conds, x+" == (time.Time{})")
			g.imports["time"] = "time"
		default:
			conds = append(conds, "reflect.ValueOf(&"+x+").Elem().IsZero()")
			g.imports["reflect"] = "reflect"
		}
	}
	if len(conds) == 0 {
		conds = []string{"true"}
	}
	g.p("func (v *%s) jsonIsZero() bool {", s.name)
	g.p("return %s", strings.Join(conds, " &&\n"))
	g.p("}\n")
}
