package selector

import "strings"

// synonymGroups are words of everyday English that name the same thing, and the
// common abbreviations of them. A request's word also looks for the other words of
// its group, at a discount (Query.SynonymWeight): a request for a film finds a skill
// that finds movies. The groups are written from general usage, not from any
// catalog, and kept to words that mean the same in nearly every context; a word
// with several senses (play, order, book) is in no group.
var synonymGroups = []string{
	"picture photo image pic photograph img",
	"film movie cinema",
	"song music track tune",
	"video clip vid",
	"audio sound",
	"speech voice",
	"cab taxi",
	"car vehicle automobile",
	"buy purchase",
	"shop store",
	"price cost",
	"reserve reservation booking",
	"flight airline",
	"hotel lodging accommodation",
	"restaurant eatery diner",
	"forecast weather",
	"email mail",
	"message msg",
	"text txt",
	"document doc docs",
	"calendar agenda",
	"appointment meeting",
	"news headline",
	"job career employment vacancy",
	"money cash",
	"summarize summarise summary tldr",
	"translate translation",
	"convert conversion converter",
	"delete remove erase",
	"update modify edit",
	"start launch begin",
	"run execute",
	"stop halt terminate",
	"compute calculate calc",
	"multiply product",
	"error bug defect",
	"code program script",
	"repo repository",
	"doctor physician",
	"therapist psychologist psychiatrist counselor counsellor",
	"concert gig",
	"cafe coffeehouse coffeeshop",
	"transfer send",
	"medicine drug medication",
	"illness disease sickness",
	"lawyer attorney",
	"kid child",
	"home house",
	"apartment flat",
	"trip journey travel",
	"vacation holiday",
	"map navigation directions",
	"location place",
	"phone telephone",
	"alarm reminder",
	"todo task",
	"note memo",
	"bill invoice",
	"pay payment",
	"loan mortgage",
	"define definition meaning",
	"quote quotation",
	"joke humor",
	"temperature temp",
	"large big",
	"small tiny",
	"cheap inexpensive affordable",
	"expensive pricey costly",
	"help assist",
	"question query",
	"answer reply response",
	"info information details",
	"stats statistics",
	"chart graph plot",
	"spreadsheet excel sheet",
	"database db",
	"website site webpage",
	"url link",
	"password passcode",
	"login signin",
	"account profile",
	"tweet twitter",
	"grocery groceries",
	"package parcel shipment",
	"country nation",
	"city town",
	"nearby near",
	"app application",
	"config configuration settings",
	"auth authentication",
	"admin administrator",
	"env environment",
	"dir directory folder",
}

// languageCodes are languages and their ISO 639-1 codes, which names of
// translation and speech models use (opus-mt-fr-en). Only the language finds its
// code: a request's two letters are more often something else ("the ES index",
// "NL to SQL", "a .pt checkpoint"). Codes that are English words (it, hi) are left out.
var languageCodes = []string{
	"english en",
	"french fr",
	"spanish es",
	"german de",
	"chinese zh",
	"japanese ja",
	"russian ru",
	"arabic ar",
	"korean ko",
	"dutch nl",
	"portuguese pt",
	"swedish sv",
	"finnish fi",
}

// synonyms maps an index term to the terms of the other words of its groups, and
// a language's to its code's.
var synonyms = func() map[string][]string {
	m := map[string][]string{}
	for _, g := range synonymGroups {
		var ts []string
		for _, w := range strings.Fields(g) {
			if t, ok := Term(w); ok && !containsString(ts, t) {
				ts = append(ts, t)
			}
		}
		for _, t := range ts {
			for _, u := range ts {
				if u != t && !containsString(m[t], u) {
					m[t] = append(m[t], u)
				}
			}
		}
	}
	for _, g := range languageCodes {
		lang, code, _ := strings.Cut(g, " ")
		t, ok := Term(lang)
		u, ok2 := Term(code)
		if ok && ok2 && !containsString(m[t], u) {
			m[t] = append(m[t], u)
		}
	}
	return m
}()

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
