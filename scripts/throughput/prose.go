package main

import (
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// prose writes English-like text for the agent load's messages: words
// drawn from a Zipf distribution over a general vocabulary mixed with a
// topic's own words, sentences of varied length, paragraphs, and the things
// agent traffic carries besides words (numbers, identifiers, names with
// non-ASCII letters, URLs, Markdown lists and code). No sentence is a
// template: every one is drawn word by word, so the text compresses like
// text, not like a repeated string.
type prose struct {
	r     *rand.Rand
	zipf  zipfTable // over commonWords
	tzipf zipfTable // over the topic's words
	topic []string
}

func newProse(r *rand.Rand, topic int) *prose {
	t := topics[topic%len(topics)]
	return &prose{r: r, zipf: commonZipf, tzipf: topicZipf[topic%len(topics)], topic: t}
}

// zipfTable draws k ∈ [0, n) with P(k) ∝ (v + k)^−s by a binary search
// of its cumulative weights (math/rand's Zipf takes a logarithm and an
// exponential per draw: most of the pool's generation time).
type zipfTable []uint32

func newZipfTable(n int, s, v float64) zipfTable {
	w := make([]float64, n)
	sum := 0.0
	for k := range n {
		w[k] = math.Pow(v+float64(k), -s)
		sum += w[k]
	}
	t := make(zipfTable, n)
	acc := 0.0
	for k := range n {
		acc += w[k]
		t[k] = uint32(math.Min(acc/sum*(1<<32-1), 1<<32-1))
	}
	t[n-1] = 1<<32 - 1
	return t
}

func (t zipfTable) draw(r *rand.Rand) int {
	x := r.Uint32()
	lo, hi := 0, len(t)-1
	for lo < hi {
		m := (lo + hi) / 2
		if t[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

var (
	commonZipf = newZipfTable(len(commonWords), 1.07, 2)
	topicZipf  = func() []zipfTable {
		out := make([]zipfTable, len(topics))
		for i, t := range topics {
			out[i] = newZipfTable(len(t), 1.2, 1)
		}
		return out
	}()
)

// lognormal draws a length with the given median and spread (σ of the
// logarithm), clamped to [lo, hi].
func lognormal(r *rand.Rand, median, sigma float64, lo, hi int) int {
	v := int(median * math.Exp(sigma*r.NormFloat64()))
	return max(lo, min(hi, v))
}

func (p *prose) word() string {
	switch x := p.r.IntN(100); {
	case x < 14:
		return p.topic[p.tzipf.draw(p.r)]
	case x < 15:
		return p.number()
	case x < 16:
		return names[p.r.IntN(len(names))]
	default:
		return commonWords[p.zipf.draw(p.r)]
	}
}

func (p *prose) number() string {
	switch p.r.IntN(6) {
	case 0:
		return strconv.Itoa(p.r.IntN(100))
	case 1:
		return strconv.FormatFloat(p.r.Float64()*1000, 'f', 2, 64)
	case 2:
		return strconv.Itoa(1990+p.r.IntN(40)) + "-" + twoDigits(1+p.r.IntN(12)) + "-" + twoDigits(1+p.r.IntN(28))
	case 3:
		return strconv.Itoa(p.r.IntN(100)) + "%"
	case 4:
		return "#" + strconv.Itoa(1000+p.r.IntN(90000))
	default:
		return strconv.Itoa(p.r.IntN(1_000_000))
	}
}

func twoDigits(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// sentence appends one sentence of 3 to ~40 words.
func (p *prose) sentence(b *strings.Builder) {
	n := lognormal(p.r, 13, 0.5, 3, 45)
	for i := range n {
		w := p.word()
		if i == 0 {
			b.WriteString(capitalize(w))
		} else {
			b.WriteByte(' ')
			if p.r.IntN(60) == 0 {
				b.WriteByte('`')
				b.WriteString(identifier(p.r))
				b.WriteByte('`')
				continue
			}
			if p.r.IntN(150) == 0 {
				b.WriteString(p.url())
				continue
			}
			b.WriteString(w)
		}
		if i < n-1 && p.r.IntN(9) == 0 {
			b.WriteByte(',')
		}
	}
	switch x := p.r.IntN(20); {
	case x < 2:
		b.WriteByte('?')
	case x < 3:
		b.WriteByte('!')
	case x < 4:
		b.WriteByte(':')
	default:
		b.WriteByte('.')
	}
	if p.r.IntN(120) == 0 {
		b.WriteString(" " + emoji[p.r.IntN(len(emoji))])
	}
}

// text appends about chars characters: paragraphs of sentences, now and
// then a list or a code block.
func (p *prose) text(b *strings.Builder, chars int) {
	start := b.Len()
	for first := true; b.Len()-start < chars; first = false {
		if !first {
			b.WriteString("\n\n")
		}
		switch x := p.r.IntN(14); {
		case x == 0 && chars > 300:
			for i := range 2 + p.r.IntN(5) {
				if i > 0 {
					b.WriteByte('\n')
				}
				b.WriteString("- ")
				p.sentence(b)
			}
		case x == 1 && chars > 400:
			p.code(b)
		default:
			for range 1 + p.r.IntN(5) {
				if b.Len() > start && b.String()[b.Len()-1] != '\n' {
					b.WriteByte(' ')
				}
				p.sentence(b)
				if b.Len()-start >= chars {
					break
				}
			}
		}
	}
}

// sized is text of a length drawn around median.
func (p *prose) sized(median float64, sigma float64, lo, hi int) string {
	var b strings.Builder
	p.text(&b, lognormal(p.r, median, sigma, lo, hi))
	return b.String()
}

func (p *prose) code(b *strings.Builder) {
	lang := []string{"python", "go", "sql", "bash", "json", "typescript"}[p.r.IntN(6)]
	b.WriteString("```" + lang + "\n")
	for range 2 + p.r.IntN(12) {
		b.WriteString(strings.Repeat("    ", p.r.IntN(3)))
		switch p.r.IntN(4) {
		case 0:
			b.WriteString(identifier(p.r) + " = " + identifier(p.r) + "(" + strconv.Quote(p.word()) + ", " + strconv.Itoa(p.r.IntN(500)) + ")")
		case 1:
			b.WriteString("if " + identifier(p.r) + " is not None and " + identifier(p.r) + " > " + strconv.Itoa(p.r.IntN(100)) + ":")
		case 2:
			b.WriteString("return " + identifier(p.r) + "." + identifier(p.r) + "()")
		default:
			b.WriteString("# " + p.word() + " " + p.word() + " " + p.word())
		}
		b.WriteByte('\n')
	}
	b.WriteString("```")
}

func (p *prose) url() string {
	return "https://" + hosts[p.r.IntN(len(hosts))] + "/" + p.topic[p.tzipf.draw(p.r)] + "/" +
		commonWords[p.zipf.draw(p.r)] + "?id=" + strconv.Itoa(p.r.IntN(100000))
}

func capitalize(w string) string {
	if w == "" || w[0] < 'a' || w[0] > 'z' {
		return w
	}
	return string(w[0]-'a'+'A') + w[1:]
}

// identifier is a code identifier of two or three syllables.
func identifier(r *rand.Rand) string {
	n := 2 + r.IntN(2)
	var b strings.Builder
	for i := range n {
		s := syllables[r.IntN(len(syllables))]
		if i > 0 && r.IntN(2) == 0 {
			b.WriteByte('_')
		}
		b.WriteString(s)
	}
	return b.String()
}

var syllables = strings.Fields(`get set user id data count load item order file path name total idx buf
	conn query row key val req resp client cfg ctx err msg tmp list map node tree sum avg max min parse
	fetch store cache token batch page limit offset score rank doc chunk embed vec meta tag`)

var emoji = []string{"✅", "🚀", "⚠️", "👍", "🙏", "📎", "🔍", "❌", "💡", "😊"}

var hosts = []string{"docs.example.com", "api.example.org", "wiki.internal.example", "github.com/example",
	"support.example.net", "en.wikipedia.org/wiki", "status.example.io", "storage.example.com/bucket"}

// names include letters outside ASCII, as user data does.
var names = strings.Fields(`Alice Bob Chen José María Zoë Łukasz Søren Ingrid Müller Nguyễn Priya Ahmed
	Fatima Olusegun Kenji Yuki 王伟 李娜 Дмитрий Анна Émilie François Guðrún Ömer Şebnem Zhang Rahul
	O'Brien Kowalski García Dubois Rossi Tanaka Kim Park Silva Santos Jensen Novak Horváth`)

// commonWords is ordered roughly by frequency (the Zipf draw favours the
// front).
var commonWords = strings.Fields(`the of and to a in is that for it as with was on be by this are
	or not you from at have an but which can they we all if will your has one more their there
	been would so what about when also into other do these some them only new may than any its
	our could like time use then see should how first each most data two way just because over
	such need make well where very after through here both much between well before those same
	information user system used using file please request result results value number case
	check help work know set list following here's let me I'll sure thanks I you're it's don't
	can't we're however based since within without order account issue error update change
	changes found find looking look back question answer response details example note step
	steps first second next last following below above still again already available current
	customer support team report summary table query search document documents page section
	source sources review analysis approach option options recommend suggested possible likely
	important specific different similar several few many multiple each every another certain
	able unable run running ran test tests testing fix fixed problem problems cause caused
	because although while during until unless whether either neither per via including
	includes included return returns returned call calls called function method class module
	service services server client api endpoint field fields record records row rows column
	columns price cost amount total date dates day days week month year hours minutes time
	times period range limit limits rate status state version versions release config
	configuration setting settings default value values type types name names key keys id ids
	email message messages reply send sent receive received team project projects plan plans
	task tasks goal goals progress complete completed pending open closed ticket tickets
	priority high low medium level levels risk risks policy policies access permission
	permissions role roles admin owner group groups member members share shared public private
	local remote global region regions zone network latency timeout retry retries failure
	failures success successful succeeded failed fails failing warning warnings log logs trace
	traces span metric metrics event events alert alerts monitor dashboard chart graph trend
	increase increased decrease decreased higher lower better worse faster slower larger smaller
	average median maximum minimum percent percentage ratio estimate estimated actual expected
	compare compared comparison versus against context model models prompt prompts output
	input tool tools agent agents memory history session sessions conversation turn turns
	understand understood explain explained describe described mention mentioned include
	consider considered provide provided require required support supported handle handled
	create created delete deleted add added remove removed move moved copy copied read write
	written open save saved load loaded start started stop stopped begin end ended finish
	good great fine right wrong true false clear simple complex easy hard quick long short
	small large big little old recent latest early late full empty free paid new used main
	why who whom whose which what whatever whenever wherever however therefore thus hence
	yes no maybe perhaps probably definitely actually really quite rather almost nearly
	around about across along among toward towards upon onto off out up down inside outside
	morning evening today tomorrow yesterday weekend Monday Friday January March September
	company business product products feature features customer's user's team's client's
	invoice invoices payment payments refund refunds shipping delivery address addresses
	contract contracts agreement terms law legal compliance security privacy encryption audit`)

// topics are each agent's domain words, mixed into its text.
var topics = [][]string{
	strings.Fields(`refund order shipment tracking warranty replacement invoice subscription plan upgrade
		downgrade cancellation charge billing receipt discount coupon carrier parcel warehouse backorder
		exchange return label courier damaged missing delayed escalation agent apology compensation`),
	strings.Fields(`function goroutine pointer slice struct interface compile build linker panic stack
		heap allocation benchmark profiler regression commit branch merge rebase pipeline deploy
		container kubernetes pod namespace manifest helm terraform module dependency vulnerability
		patch refactor lint unittest fixture mock coverage flaky timeout deadlock mutex channel`),
	strings.Fields(`revenue margin forecast quarter fiscal budget expense ledger balance accrual
		depreciation amortization EBITDA cashflow liquidity equity portfolio dividend yield bond
		inflation interest hedge exposure variance reconciliation audit GAAP IFRS valuation`),
	strings.Fields(`patient diagnosis symptom dosage prescription allergy appointment clinic referral
		insurance claim coverage deductible copay lab result imaging MRI blood pressure glucose
		cholesterol vaccine therapy follow-up discharge triage nurse physician specialist`),
	strings.Fields(`flight hotel itinerary booking reservation layover airport terminal gate baggage
		passport visa check-in boarding seat upgrade loyalty miles fare refundable nonstop
		connection departure arrival rental car museum restaurant neighborhood transit`),
	strings.Fields(`paper citation abstract methodology dataset hypothesis experiment sample
		regression correlation significance p-value confidence interval baseline ablation
		benchmark transformer embedding attention fine-tuning corpus annotation evaluation
		reviewer arxiv preprint survey literature theorem proof lemma`),
	strings.Fields(`contract clause liability indemnity jurisdiction arbitration warranty termination
		confidentiality license trademark patent copyright compliance regulation GDPR consent
		subpoena counsel plaintiff defendant settlement amendment addendum notarized signatory`),
	strings.Fields(`sensor telemetry firmware gateway MQTT threshold anomaly vibration temperature
		humidity pressure calibration maintenance turbine conveyor PLC SCADA downtime throughput
		yield defect inspection batch lot shift operator alarm setpoint`),
}
