package skill

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

func decodeOutputs(b *builder, d *decoder, p pair) {
	wb := b.workflow(d)
	wb.outputsAt = p.k
	ps, _ := d.pairs(p.v, "outputs", "write name: value pairs, such as branch: \"{{ branch_name }}\"")
	for _, e := range ps {
		f := "outputs." + e.key
		v, _ := d.value(e.v, f)
		wb.w.Outputs = append(wb.w.Outputs, Output{Name: e.key, Value: v})
		wb.templates(d, e.v, f, scopeAll, "")
	}
}

func decodeConfirmations(b *builder, d *decoder, p pair) {
	wb := b.workflow(d)
	nodes, _ := d.seq(p.v, "confirmations", "write a list such as - step: create_branch, message: ...")
	for i, n := range nodes {
		f := fmt.Sprintf("confirmations[%d]", i)
		ps, ok := d.pairs(n, f, "write step: and message:")
		if !ok {
			continue
		}
		var c Confirmation
		ci := confirmInfo{n: n, field: f}
		var msgN *yaml.Node
		for _, e := range ps {
			ef := f + "." + e.key
			switch e.key {
			case "step":
				ci.stepN = e.v
				c.Step, _ = d.str(e.v, ef)
			case "message":
				msgN = e.v
				c.Message, _ = d.str(e.v, ef)
			case "default":
				c.Default, _ = d.boolean(e.v, ef)
			case "timeout":
				c.Timeout, _ = d.duration(e.v, ef)
			default:
				d.warnAt(e.k, ef, hintFor(e.key, []string{"step", "message", "default", "timeout"}), "unknown field %s; it is ignored", ef)
			}
		}
		if c.Step == "" {
			d.errAt(n, f+".step", "name the step to confirm", "%s names no step", f)
			continue
		}
		if strings.TrimSpace(c.Message) == "" {
			d.errAt(n, f+".message", "say what is about to happen, e.g. \"Create branch {{ branch_name }}?\"", "confirmation of %s has no message", c.Step)
			continue
		}
		if msgN != nil && strings.Contains(c.Message, "{{") {
			wb.newSite(siteTemplate, c.Message, f+".message", msgN, scopeConfirm, "")
			wb.sites[len(wb.sites)-1].confirm = len(wb.confirms)
		}
		wb.confirms = append(wb.confirms, ci)
		wb.w.Confirmations = append(wb.w.Confirmations, c)
	}
}
