package skill

import (
	"bytes"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// ParseSkillMD parses a SKILL.md, or a single-file skill <name>.md: YAML front matter
// and a markdown body of instructions. The skill is nil when there are errors. It
// uses the zero LoadOptions; see LoadOptions.ParseSkillMD.
func ParseSkillMD(file string, data []byte) (*Skill, Diagnostics) {
	return LoadOptions{}.ParseSkillMD(file, data)
}

// ParseWorkflow parses a skill.yaml, or a single-file skill <name>.yaml: the
// workflow, plus any metadata field a SKILL.md front matter may hold. The skill is
// nil when there are errors. It uses the zero LoadOptions; see
// LoadOptions.ParseWorkflow.
func ParseWorkflow(file string, data []byte) (*Skill, Diagnostics) {
	return LoadOptions{}.ParseWorkflow(file, data)
}

// ParseSkillMD is the package's ParseSkillMD with these options.
func (o LoadOptions) ParseSkillMD(file string, data []byte) (*Skill, Diagnostics) {
	var ds Diagnostics
	f := fileData{path: file, rel: path.Base(filepath.ToSlash(file)), data: data}
	b := o.parse(&ds, &f, nil, "", metaFields)
	return finishParsed(b, &ds, []fileData{f}), ds
}

// ParseWorkflow is the package's ParseWorkflow with these options.
func (o LoadOptions) ParseWorkflow(file string, data []byte) (*Skill, Diagnostics) {
	var ds Diagnostics
	f := fileData{path: file, rel: path.Base(filepath.ToSlash(file)), data: data}
	b := o.parse(&ds, nil, &f, "", metaFields)
	return finishParsed(b, &ds, []fileData{f}), ds
}

func finishParsed(b *builder, ds *Diagnostics, files []fileData) *Skill {
	ds.Sort()
	if b == nil || ds.HasErrors() {
		return nil
	}
	b.s.Digest = digest(files)
	return b.s
}

// fileData is one file of a skill: its path for messages, its path relative to the
// skill directory, and its contents.
type fileData struct {
	path string
	rel  string
	data []byte
	sum  string // sha256 of data, hex, once computed
}

// parse builds a skill from a SKILL.md, a skill.yaml, or both. dir is the skill
// directory, "" for a single file; mdFields the fields the markdown may hold. The
// result is nil when the files could not be read as YAML at all.
func (o *LoadOptions) parse(ds *Diagnostics, md, wf *fileData, dir string, mdFields *fieldSet) *builder {
	o = o.withDefaults()
	b := newBuilder(o, ds)
	var doc markdown
	main := md
	if main == nil {
		main = wf
	}
	mainR := report{file: main.path, ds: ds}
	ok := true
	if md != nil {
		b.s.Source = md.path
		doc, ok = o.readMarkdown(b, md, wf != nil, mdFields)
	}
	if wf != nil {
		if md == nil {
			b.s.Source = wf.path
		}
		ok = o.readWorkflow(b, wf) && ok
	}
	if !ok {
		return nil
	}
	b.finish(mainR)
	if md != nil {
		checkBody(report{file: md.path, ds: ds}, doc, b.s.Kind == KindInstruction)
	}
	b.s.Dir = dir
	return b
}

// readMarkdown reads a SKILL.md into b. Front matter is required unless a skill.yaml
// carries the metadata, in which case the whole file is the body.
func (o *LoadOptions) readMarkdown(b *builder, f *fileData, haveYAML bool, fields *fieldSet) (markdown, bool) {
	r := report{file: f.path, ds: b.ds}
	if !o.sizeOK(r, f) || !textOK(r, f) {
		return markdown{}, false
	}
	data := normalizeText(f.data)
	doc := splitFrontMatter(data)
	switch {
	case !doc.hasFM:
		first, end, ok := frontMatterWithoutOpening(data, fields)
		if !ok {
			break
		}
		key, _, _ := strings.Cut(first.text, ":")
		r.add(SeverityError, first.line, 1, "", fmt.Sprintf("put a line --- on line 1, before %s:", key),
			"front matter must start with a line ---; %s has fields from line %d (%s:) to the --- on line %d, with no --- above them",
			path.Base(filepath.ToSlash(f.path)), first.line, key, end)
		return doc, false
	}
	switch {
	case !doc.hasFM && haveYAML:
		b.s.Body, b.s.BodyLine = doc.body, 1
		return doc, true
	case !doc.hasFM:
		hint := "start the file with a front matter block: a line ---, name: and description: fields, and a closing ---"
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("---")) || bytes.Contains(data, []byte("\n---\n")) {
			hint = "front matter starts on the first line, which must be exactly ---"
		}
		r.add(SeverityError, 1, 1, "", hint, "%s has no front matter", path.Base(filepath.ToSlash(f.path)))
		return doc, false
	case !doc.closed:
		r.add(SeverityError, 1, 1, "", "end the front matter with a line ---", "front matter is not closed")
		return doc, false
	}
	root, ok := parseYAML(r, doc.fm, fields, "front matter")
	if !ok {
		return doc, false
	}
	d := newDecoder(f.path, b.ds)
	d.src = string(data) // node lines are the file's: positions inside block scalars read it
	if root != nil {
		if !isMapping(d, root, "front matter") {
			return doc, false
		}
		ps, ok := d.pairs(root, "", "")
		if !ok {
			return doc, false
		}
		b.fields(d, ps, fields, "front matter")
	}
	b.mainDecoder = d
	b.s.Body, b.s.BodyLine = doc.body, doc.bodyLine
	return doc, true
}

// readWorkflow reads a skill.yaml into b.
func (o *LoadOptions) readWorkflow(b *builder, f *fileData) bool {
	r := report{file: f.path, ds: b.ds}
	if !o.sizeOK(r, f) || !textOK(r, f) {
		return false
	}
	data := normalizeText(f.data)
	root, ok := parseYAML(r, data, workflowFields, path.Base(filepath.ToSlash(f.path)))
	if !ok {
		return false
	}
	d := newDecoder(f.path, b.ds)
	d.src = string(data)
	if b.mainDecoder == nil {
		b.mainDecoder = d
	}
	if root == nil {
		return true
	}
	if !isMapping(d, root, path.Base(filepath.ToSlash(f.path))) {
		return false
	}
	ps, ok := d.pairs(root, "", "")
	if !ok {
		return false
	}
	b.fields(d, ps, workflowFields, path.Base(filepath.ToSlash(f.path)))
	return true
}

// numberedLine is a line of a file and its number.
type numberedLine struct {
	line int
	text string
}

// frontMatterWithoutOpening finds front matter that lacks its opening --- line: the
// file's first non-blank line is a field of fields (name: x), and a later line is
// ---. first is that field's line; end, the line of the ---.
func frontMatterWithoutOpening(data []byte, fields *fieldSet) (first numberedLine, end int, ok bool) {
	for i, l := range strings.Split(string(data), "\n") {
		if first.line == 0 {
			if strings.TrimSpace(l) == "" {
				continue
			}
			key, rest, found := strings.Cut(l, ":")
			if !found || !fields.known(key) || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
				return numberedLine{}, 0, false
			}
			first = numberedLine{line: i + 1, text: l}
			continue
		}
		if isDelimiter([]byte(l)) {
			return first, i + 1, true
		}
	}
	return numberedLine{}, 0, false
}

// isMapping reports whether a document's root is a mapping of fields.
func isMapping(d *decoder, root *yaml.Node, what string) bool {
	if r := d.resolve(root); r != nil && r.Kind == yaml.MappingNode {
		return true
	}
	d.errAt(root, "", "write one field per line: name: my-skill, description: ...", "%s must be a mapping of fields, not %s", what, describe(d.resolve(root)))
	return false
}

func (o *LoadOptions) sizeOK(r report, f *fileData) bool {
	if o.MaxFileSize > 0 && int64(len(f.data)) > o.MaxFileSize {
		r.add(SeverityError, 0, 0, "", "split it: move detail into references/",
			"%s is %s; the limit for a text file is %s", path.Base(filepath.ToSlash(f.path)), size(int64(len(f.data))), size(o.MaxFileSize))
		return false
	}
	return true
}

// textOK rejects files that are not UTF-8 text.
func textOK(r report, f *fileData) bool {
	if isBinary(f.data) {
		r.add(SeverityError, 0, 0, "", "save it as UTF-8 text", "%s is not UTF-8 text", path.Base(filepath.ToSlash(f.path)))
		return false
	}
	return true
}

// isBinary reports whether data holds a NUL byte or is not valid UTF-8.
func isBinary(data []byte) bool {
	return bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data)
}

func size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

const (
	minTimeout = time.Second // a timeout outside minTimeout–maxTimeout warns
	maxTimeout = 5 * time.Minute
)
