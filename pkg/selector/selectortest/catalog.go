// Package selectortest generates skill catalogs of any size with one-line
// descriptions, and requests labelled with the skill they mean, for routing
// benchmarks and evaluations at scale. Requests are written the way people write
// them: other word forms (deploying, invoices), stop words and fillers, punctuation,
// an occasional typo, a word of the skill's name.
package selectortest

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/skillbus/skillbus/pkg/selector"
	"github.com/skillbus/skillbus/pkg/skill"
)

type verb struct{ base, ing, past string }

var verbs = []verb{
	{"summarize", "summarizing", "summarized"}, {"translate", "translating", "translated"}, {"deploy", "deploying", "deployed"},
	{"backup", "backing up", "backed up"}, {"scale", "scaling", "scaled"}, {"resize", "resizing", "resized"},
	{"convert", "converting", "converted"}, {"generate", "generating", "generated"}, {"analyze", "analyzing", "analyzed"},
	{"validate", "validating", "validated"}, {"format", "formatting", "formatted"}, {"monitor", "monitoring", "monitored"},
	{"schedule", "scheduling", "scheduled"}, {"archive", "archiving", "archived"}, {"encrypt", "encrypting", "encrypted"},
	{"compress", "compressing", "compressed"}, {"parse", "parsing", "parsed"}, {"render", "rendering", "rendered"},
	{"index", "indexing", "indexed"}, {"migrate", "migrating", "migrated"}, {"audit", "auditing", "audited"},
	{"classify", "classifying", "classified"}, {"export", "exporting", "exported"}, {"import", "importing", "imported"},
	{"merge", "merging", "merged"}, {"sync", "syncing", "synced"}, {"rotate", "rotating", "rotated"},
	{"review", "reviewing", "reviewed"}, {"clean", "cleaning", "cleaned"}, {"tag", "tagging", "tagged"},
	{"publish", "publishing", "published"}, {"restore", "restoring", "restored"}, {"benchmark", "benchmarking", "benchmarked"},
	{"deduplicate", "deduplicating", "deduplicated"}, {"anonymize", "anonymizing", "anonymized"}, {"transcribe", "transcribing", "transcribed"},
	{"forecast", "forecasting", "forecasted"}, {"lint", "linting", "linted"}, {"search", "searching", "searched"}, {"visualize", "visualizing", "visualized"},
}

type object struct{ one, many string }

var objects = []object{
	{"pdf document", "pdf documents"}, {"invoice", "invoices"}, {"kubernetes deployment", "kubernetes deployments"},
	{"docker image", "docker images"}, {"log file", "log files"}, {"csv spreadsheet", "csv spreadsheets"}, {"email", "emails"},
	{"calendar event", "calendar events"}, {"database table", "database tables"}, {"photo", "photos"},
	{"audio recording", "audio recordings"}, {"markdown note", "markdown notes"}, {"api spec", "api specs"},
	{"git branch", "git branches"}, {"jira ticket", "jira tickets"}, {"slack channel", "slack channels"},
	{"s3 bucket", "s3 buckets"}, {"dns record", "dns records"}, {"tls certificate", "tls certificates"},
	{"user account", "user accounts"}, {"customer review", "customer reviews"}, {"sales report", "sales reports"},
	{"terraform module", "terraform modules"}, {"helm chart", "helm charts"}, {"video clip", "video clips"},
	{"contract", "contracts"}, {"receipt", "receipts"}, {"web page", "web pages"}, {"json payload", "json payloads"},
	{"sql query", "sql queries"}, {"metric dashboard", "metric dashboards"}, {"config file", "config files"},
	{"backup snapshot", "backup snapshots"}, {"support ticket", "support tickets"}, {"product catalog", "product catalogs"},
	{"translation file", "translation files"}, {"font", "fonts"}, {"map tile", "map tiles"}, {"sensor reading", "sensor readings"},
	{"survey response", "survey responses"}, {"wiki page", "wiki pages"}, {"pull request", "pull requests"},
	{"container registry", "container registries"}, {"password vault", "password vaults"}, {"mailing list", "mailing lists"},
	{"shipping label", "shipping labels"}, {"payroll record", "payroll records"}, {"chat transcript", "chat transcripts"},
	{"feature flag", "feature flags"}, {"cron job", "cron jobs"},
}

var audiences = []string{"the finance team", "the support desk", "on-call engineers", "the legal department", "marketing", "data scientists", "auditors", "new hires"}

var fillers = []string{"please", "can you", "could you", "I need to", "help me", "quickly", "hey,", "we should"}

// Catalog returns n skills (n ≤ 16,000), each a verb on an object for an audience,
// with a one-line description and nothing else, and for each of the first
// labelled skills a request meaning it. The same seed gives the same catalog.
func Catalog(n int, seed uint64) []*skill.Skill {
	out := make([]*skill.Skill, 0, n)
	for i := range n {
		v := verbs[i%len(verbs)]
		o := objects[(i/len(verbs))%len(objects)]
		a := (i / (len(verbs) * len(objects))) % len(audiences)
		name := slug(v.base + " " + o.many)
		desc := fmt.Sprintf("%s %s for %s.", strings.ToUpper(v.base[:1])+v.base[1:], o.many, audiences[a])
		if a > 0 {
			name += fmt.Sprintf("-%d", a)
		}
		out = append(out, &skill.Skill{Name: name, Description: desc, Digest: fmt.Sprintf("%x-%d", seed, i), CostHint: "medium", Kind: skill.KindInstruction})
	}
	return out
}

func slug(s string) string {
	return strings.Join(strings.Fields(strings.NewReplacer(" ", "-").Replace(s)), "-")
}

// Requests returns one labelled request for each of n random skills of the catalog,
// plus off-topic requests (no skill should take them).
func Requests(skills []*skill.Skill, n int, seed uint64) []selector.Case {
	r := rand.New(rand.NewPCG(seed, 7))
	var out []selector.Case
	for range n {
		i := r.IntN(len(skills))
		v := verbs[i%len(verbs)]
		o := objects[(i/len(verbs))%len(objects)]
		a := (i / (len(verbs) * len(objects))) % len(audiences)
		aud := strings.TrimPrefix(audiences[a], "the ")
		var q string
		switch r.IntN(5) {
		case 0:
			q = fmt.Sprintf("%s %s the %s for %s", fillers[r.IntN(len(fillers))], v.base, o.one, aud)
		case 1:
			q = fmt.Sprintf("%s %s, for %s?", v.ing, o.many, aud)
		case 2:
			q = fmt.Sprintf("the %s need %s (%s)", o.many, wordOf(v.past), aud)
		case 3:
			q = fmt.Sprintf("%s: %s %s", aud, typo(r, v.base), o.many)
		default:
			q = fmt.Sprintf("%s %s %s for %s", fillers[r.IntN(len(fillers))], v.base, strings.ToUpper(o.one), aud)
		}
		out = append(out, selector.Case{Query: q, Expect: skills[i].Name})
	}
	for _, q := range offTopic {
		out = append(out, selector.Case{Query: q})
	}
	return out
}

func wordOf(s string) string { return s }

// typo swaps two letters in the middle of a word of five letters or more.
func typo(r *rand.Rand, w string) string {
	if len(w) < 5 {
		return w
	}
	i := 1 + r.IntN(len(w)-3)
	b := []byte(w)
	b[i], b[i+1] = b[i+1], b[i]
	return string(b)
}

var offTopic = []string{
	"what's the capital of australia", "tell me a joke about cats", "who won the football match yesterday",
	"recommend a good pizza place nearby", "how tall is mount everest", "play some relaxing music",
	"what is the meaning of life", "book a flight to lisbon", "how do I bake sourdough bread",
	"who wrote pride and prejudice", "suggest a movie for tonight", "how far is the moon",
}
