package pipeline

import (
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/streamkpca/streamkpca/online"
)

// ratePoint is one sample of the learned count and the lag, at most one a
// second over the last rateSpan: the status page's throughput now and lag
// trend.
type ratePoint struct {
	t       time.Time
	samples uint64
	lag     int64
}

const (
	rateSpan = 2 * time.Minute
	rateNow  = 10 * time.Second // "throughput now" is over this
)

// recordRate adds a rate sample (p.mu held), one a second at most.
func (p *Pipeline) recordRate(now time.Time, samples uint64, lag int64) {
	if n := len(p.led.recent); n > 0 && now.Sub(p.led.recent[n-1].t) < time.Second {
		return
	}
	p.led.recent = append(p.led.recent, ratePoint{now, samples, lag})
	i := 0
	for i < len(p.led.recent)-1 && now.Sub(p.led.recent[i].t) > rateSpan {
		i++
	}
	p.led.recent = p.led.recent[i:]
}

// rates returns the learned samples per second over the last rateNow and
// the lag's change per second over the samples kept (ok false with fewer
// than two samples).
func rates(pts []ratePoint) (perSec, lagPerSec float64, span time.Duration, ok bool) {
	if len(pts) < 2 {
		return 0, 0, 0, false
	}
	last := pts[len(pts)-1]
	i := len(pts) - 2
	for i > 0 && last.t.Sub(pts[i].t) < rateNow {
		i--
	}
	if dt := last.t.Sub(pts[i].t).Seconds(); dt > 0 {
		perSec = float64(last.samples-pts[i].samples) / dt
	}
	first := pts[0]
	span = last.t.Sub(first.t)
	if s := span.Seconds(); s > 0 {
		lagPerSec = float64(last.lag-first.lag) / s
	}
	return perSec, lagPerSec, span, true
}

// lagTrend says in words where the lag is going.
func lagTrend(lagPerSec float64, span time.Duration) string {
	switch {
	case lagPerSec > 1:
		return fmt.Sprintf("growing by %.0f messages/s over the last %.0f s", lagPerSec, span.Seconds())
	case lagPerSec < -1:
		return fmt.Sprintf("shrinking by %.0f messages/s over the last %.0f s", -lagPerSec, span.Seconds())
	}
	return fmt.Sprintf("steady over the last %.0f s", span.Seconds())
}

// history keeps the eigenvalue estimates of recent snapshots for the status
// page's chart.
type historyPoint struct {
	Samples     uint64
	Eigenvalues []float64
	// Novel is the share of the records written since the previous
	// snapshot that were novel (output.topic), and Records how many:
	// the novelty rate's chart (none without records).
	Novel   float64
	Records uint64
}

const historyLen = 200

var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"f3":  func(v float64) string { return fmt.Sprintf("%.4g", v) },
	"pct": func(v float64) float64 { return 100 * v },
	"inv": func(v float64) float64 { return 1 / v },
	"mib": func(v any) string {
		var b float64
		switch n := v.(type) {
		case uint64:
			b = float64(n)
		case int64:
			b = float64(n)
		}
		return strconv.FormatFloat(b/(1<<20), 'f', 1, 64)
	},
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>streamkpca — {{.Model}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:60em}
table{border-collapse:collapse}td,th{padding:.25em .8em;text-align:left;border-bottom:1px solid #ddd}
th{font-weight:600;color:#555}h1{font-size:1.4em}code{background:#f4f4f4;padding:0 .2em}
</style></head><body>
<h1>streamkpca · model <code>{{.Model}}</code> · {{.Algorithm}}</h1>
<table>
<tr><th>version (persisted)</th><td>{{.Version}}</td></tr>
<tr><th>version (published on NATS)</th><td>{{.Published}}{{if .StandingBy}} · <b>standing by</b>: the model name is owned by {{.StandingBy}}; nothing is published until its lease lapses (nats.lease_ttl){{end}}</td></tr>
{{if .NATSConfigured}}<tr><th>NATS server</th><td>{{if .NATSServer}}{{.NATSServer}}{{else}}<b>disconnected</b>: reconnecting to the servers of nats.url; learning goes on{{end}}</td></tr>{{end}}
{{with .Store}}<tr><th>object store (NATS)</th><td>{{mib .Bytes}} MiB of {{if gt .MaxBytes 0}}{{mib .MaxBytes}} MiB (the bucket's limit){{else}}no bucket limit{{end}}{{if gt .AccountMax 0}} · account storage {{mib .AccountBytes}} of {{mib .AccountMax}} MiB{{else if .AccountBytes}} · account storage {{mib .AccountBytes}} MiB, no account limit{{end}}; when full, the oldest versions no reader needs are deleted to make room</td></tr>{{end}}
<tr><th>samples learned</th><td>{{.Samples}}</td></tr>
<tr><th>settings</th><td>k = {{.K}} · kernel {{.Kernel}}{{if .Bandwidth}} · bandwidth {{printf "%.4g" .Bandwidth}}{{end}} · {{.Features_}} features · {{.Solver}} solver</td></tr>
<tr><th>throughput now</th><td>{{if .RateOK}}{{printf "%.0f" .RateNow}} samples/s over the last {{.RateWindow}} s{{else}}measuring…{{end}} ({{printf "%.0f" .Rate}} samples/s since start)</td></tr>
<tr><th>random features</th><td>{{.Features}} (budget {{.Budget}}{{if gt .Budget .MaxFeatures}}, grown past learner.max_features {{.MaxFeatures}} while the stream leaves the learner idle{{end}})</td></tr>
{{if .Cluster}}<tr><th>cluster</th><td>{{if .Members}}one model with {{.Members}} instance(s), generation {{.Generation}}{{else}}not stepping (joining the group, or no partitions assigned){{end}}</td></tr>{{end}}
<tr><th>consumer lag</th><td>{{.Lag}} messages{{if .RateOK}}, {{.LagTrend}}{{end}} (messages in the topic not read yet)</td></tr>
<tr><th>learning</th><td>{{if lt .Fraction 1.0}}{{printf "%.1f" (pct .Fraction)}}% of the messages, to keep up with the stream ({{.Shed}} not learned so far; learner.load_shedding){{else}}every message{{if .Shed}} ({{.Shed}} not learned earlier, to keep up){{end}}{{end}}{{if .Revisited}}; {{.Revisited}} rows learned again with the time the stream left (learner.replay){{end}}</td></tr>
<tr><th>bad messages (dead-lettered)</th><td>{{.Bad}}{{if .Reasons}} — {{range $i, $r := .Reasons}}{{if $i}}, {{end}}{{$r.Reason}} {{$r.N}}{{end}}{{end}}{{if .Hint}}<br><strong>{{.Hint}}</strong>{{end}}</td></tr>
<tr><th>eigenvalue estimates</th><td>{{range .Eigenvalues}}{{f3 .}} {{end}}</td></tr>
<tr><th>quality (held-out, no truth needed)</th><td>{{with .Quality}}{{printf "%.4g" .Score}} {{$.QualityMeaning}} over the last {{printf "%.0f" .Points}} held-out messages{{else}}none yet (one message in {{.Holdout}} is scored before it is learned){{end}}</td></tr>
<tr><th>changes of the stream detected</th><td>{{.Changes}}{{if .Changes}} (the model restarted at step {{.Restart}}){{end}}</td></tr>
<tr><th>following gradual change</th><td>{{if eq .Forget "follow"}}{{.Switches}} time(s) a learner of the recent stream replaced the model, {{.Rollbacks}} candidate(s) withdrawn{{with .Quality}}{{if .Fit}}{{if .Level}} · {{if .Candidate}}a candidate is on trial: held-out score the model's {{printf "%.4f" .Fit}}, the candidate's {{printf "%.4f" .Challenger}}{{else}}scouts: held-out score the shadow's {{printf "%.4f" .Fit}}, the challenger's {{printf "%.4f" .Challenger}}{{end}}, evidence {{printf "%.3g" .Evidence}} (the test rejects at {{printf "%.3g" (inv .Level)}}){{else}} · the model's score on the last window {{printf "%.4f" .Fit}}, the challenger's {{printf "%.4f" .Challenger}}{{end}}{{end}}{{end}}{{else}}off (learner.forget: {{.Forget}}){{end}}</td></tr>
{{with .Score}}<tr><th>{{.Name}}</th><td>{{if .Err}}not computed: {{.Err}}{{else}}{{printf "%.3g" .Value}}{{end}} (version {{.Version}})</td></tr>{{end}}
{{if .OutputTopic}}<tr><th>output topic</th><td><code>{{.OutputTopic}}</code>: {{.OutRecords}} records written, {{.OutNovel}} novel (novelty ≥ {{.Quantile}}: at most {{printf "%.3g" .Bound}} of an unchanging stream's){{if .OutDown}}<br><strong>{{.OutDown}}</strong>{{end}}</td></tr>{{end}}
<tr><th>last snapshot</th><td>{{.LastSnapshot}}</td></tr>
</table>
<h2 style="font-size:1.1em">Convergence: eigenvalue estimates per snapshot</h2>
{{.Chart}}
{{if .OutputTopic}}<h2 style="font-size:1.1em">Novelty rate: the share of records novel, per version</h2>
{{.NoveltyChart}}{{end}}
<p style="color:#777">Refreshes every 5 s. API: <code>/v1/models/{{.Model}}</code>, <code>/metrics</code>, <code>/healthz</code>.</p>
</body></html>
`))

// statusPage serves the HTML status page at /.
func (p *Pipeline) statusPage(start time.Time) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		st := p.Status()
		p.mu.Lock()
		hist := append([]historyPoint(nil), p.led.history...)
		nowRate, lagPerSec, span, rateOK := rates(p.led.recent)
		p.mu.Unlock()
		last := "none yet"
		if !st.LastSnapshot.IsZero() {
			last = st.LastSnapshot.Format(time.RFC3339) + fmt.Sprintf(" (%.0f s ago)", time.Since(st.LastSnapshot).Seconds())
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		type reasonCount struct {
			Reason string
			N      uint64
		}
		var reasons []reasonCount
		for _, r := range slices.Sorted(maps.Keys(st.BadByReason)) {
			reasons = append(reasons, reasonCount{r, st.BadByReason[r]})
		}
		var score *ScoreValue
		if v, ok := p.Score(); ok {
			score = &v
		}
		outDown := ""
		if since, err := p.outputDown(); !since.IsZero() {
			outDown = fmt.Sprintf("refusing records for %.0f s (%v): learning waits until they are stored", time.Since(since).Seconds(), err)
		}
		statusTmpl.Execute(w, map[string]any{
			"OutputTopic": p.cfg.Output.Topic, "OutRecords": st.OutRecords, "OutNovel": st.OutNovel, "Quantile": p.cfg.Output.NoveltyQuantile,
			"Bound": 1 - p.cfg.Output.NoveltyQuantile, "OutDown": outDown, "NoveltyChart": template.HTML(noveltyChart(hist, 1-p.cfg.Output.NoveltyQuantile)),
			"Score":   score,
			"Reasons": reasons,
			"Model":   p.cfg.Model, "Algorithm": p.cfg.Learner.Algorithm, "Version": st.Version, "Published": st.Published, "StandingBy": st.StandingBy, "Store": st.Store, "NATSServer": st.NATSServer, "NATSConfigured": p.pub.nc != nil,
			"Samples": st.Samples, "Rate": float64(st.Samples-p.led.startSamples) / time.Since(start).Seconds(),
			"Features": st.Features, "Budget": st.Budget, "MaxFeatures": p.cfg.Learner.MaxFeatures, "Lag": st.Lag, "Bad": st.Bad, "Hint": st.Hint, "Eigenvalues": st.Eigenvalues,
			"LastSnapshot": last, "Chart": template.HTML(eigenChart(hist)),
			"Cluster": p.cfg.Cluster.Enabled, "Members": st.Members, "Generation": st.Generation,
			"Quality": st.Quality, "QualityMeaning": "(" + online.Algorithm(p.cfg.Learner.Algorithm).ScoreMeaning() + ")", "Holdout": p.cfg.Learner.Holdout,
			"Changes": st.Changes, "Restart": st.Restart, "Switches": st.Switches, "Rollbacks": st.Rollbacks, "Forget": p.cfg.Learner.Forget, "Fraction": st.LearnedFraction, "Shed": st.Shed, "Revisited": st.Revisited,
			"K": p.cfg.Learner.K, "Kernel": p.cfg.Learner.Kernel, "Bandwidth": st.Bandwidth, "Features_": p.cfg.Learner.Features, "Solver": p.cfg.Learner.Solver,
			"RateOK": rateOK, "RateNow": nowRate, "RateWindow": int(math.Round(min(span, rateNow).Seconds())), "LagTrend": lagTrend(lagPerSec, span),
		})
	}
}

// eigenChart draws the eigenvalue estimates against samples as an inline
// SVG (log y), one polyline per component.
func eigenChart(h []historyPoint) string {
	if len(h) < 2 {
		return `<p style="color:#777">(the chart appears after two snapshots)</p>`
	}
	const W, H, pad, left = 640.0, 260.0, 30.0, 60.0
	lo, hi := 1e300, -1e300
	for _, p := range h {
		for _, v := range p.Eigenvalues {
			if v > 0 {
				lo, hi = min(lo, v), max(hi, v)
			}
		}
	}
	if !(hi > lo) {
		hi = lo * 10
	}
	x0, x1 := float64(h[0].Samples), float64(h[len(h)-1].Samples)
	if x1 <= x0 {
		x1 = x0 + 1
	}
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	var b strings.Builder
	k := len(h[len(h)-1].Eigenvalues)
	fmt.Fprintf(&b, `<svg width="%.0f" height="%.0f" role="img" aria-label="eigenvalue estimates against samples learned" style="border:1px solid #ddd">`, W+90, H)
	// Axes: y log-scaled eigenvalue, x samples learned.
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/><line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/>`,
		left, pad, left, H-pad, left, H-pad, W-pad, H-pad)
	// y ticks: the range's ends and the decades (and their halves' 2 and
	// 5) between them, with light grid lines; x ticks at every quarter.
	yOf := func(v float64) float64 { return H - pad - (H-2*pad)*(logf(v)-logf(lo))/(logf(hi)-logf(lo)) }
	ticks := []float64{lo, hi}
	for d := math.Pow(10, math.Floor(math.Log10(lo))); d <= hi; d *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * d; v > lo*1.15 && v < hi/1.15 {
				ticks = append(ticks, v)
			}
		}
	}
	for _, v := range ticks {
		y := yOf(v)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%.3g</text>`,
			left, y, W-pad, y, left-4, y+4, v)
	}
	for i := 1; i < 4; i++ {
		x := left + (W-pad-left)*float64(i)/4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#999"/><text x="%.1f" y="%.0f" font-size="11" text-anchor="middle">%.0f</text>`,
			x, H-pad, x, H-pad+4, x, H-pad+14, x0+(x1-x0)*float64(i)/4)
	}
	fmt.Fprintf(&b, `<text x="14" y="%.0f" font-size="11" transform="rotate(-90 14 %.0f)" text-anchor="middle">eigenvalue (log scale)</text>`, H/2, H/2)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11">%d</text><text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%d</text>`,
		left, H-pad+14, h[0].Samples, W-pad, H-pad+14, h[len(h)-1].Samples)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11" text-anchor="middle">samples learned</text>`, (left+W-pad)/2, H-4)
	for q := 0; q < k; q++ {
		c := colors[q%len(colors)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, c)
		for _, p := range h {
			if q >= len(p.Eigenvalues) || !(p.Eigenvalues[q] > 0) {
				continue
			}
			x := left + (W-pad-left)*(float64(p.Samples)-x0)/(x1-x0)
			y := yOf(p.Eigenvalues[q])
			fmt.Fprintf(&b, "%.1f,%.1f ", x, y)
		}
		b.WriteString(`"/>`)
		// Legend, right of the plot.
		ly := pad + 16*float64(q)
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="%s" stroke-width="2"/><text x="%.0f" y="%.0f" font-size="11">λ%d</text>`,
			W, ly, W+16, ly, c, W+20, ly+4, q+1)
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func logf(v float64) float64 { return math.Log(v) }

// noveltyChart draws the share of records novel per version against
// samples learned as an inline SVG, with the bound an unchanging stream
// keeps to (1 − output.novelty_quantile) dashed.
func noveltyChart(h []historyPoint, bound float64) string {
	var pts []historyPoint
	for _, p := range h {
		if p.Records > 0 {
			pts = append(pts, p)
		}
	}
	if len(pts) < 2 {
		return `<p style="color:#777">(the chart appears after two versions with records)</p>`
	}
	const W, H, pad, left = 640.0, 180.0, 30.0, 60.0
	hi := 2 * bound
	for _, p := range pts {
		hi = max(hi, p.Novel)
	}
	x0, x1 := float64(pts[0].Samples), float64(pts[len(pts)-1].Samples)
	if x1 <= x0 {
		x1 = x0 + 1
	}
	xOf := func(v float64) float64 { return left + (W-pad-left)*(v-x0)/(x1-x0) }
	yOf := func(v float64) float64 { return H - pad - (H-2*pad)*v/hi }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%.0f" height="%.0f" role="img" aria-label="share of records novel per version against samples learned" style="border:1px solid #ddd">`, W, H)
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/><line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="#999"/>`,
		left, pad, left, H-pad, left, H-pad, W-pad, H-pad)
	for _, v := range []float64{0, bound, hi} {
		fmt.Fprintf(&b, `<text x="%.0f" y="%.1f" font-size="11" text-anchor="end">%.3g</text>`, left-4, yOf(v)+4, v)
	}
	fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#d62728" stroke-dasharray="4 3"/>`, left, yOf(bound), W-pad, yOf(bound))
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f" font-size="11">%d</text><text x="%.0f" y="%.0f" font-size="11" text-anchor="end">%d samples learned</text>`,
		left, H-pad+14, pts[0].Samples, W-pad, H-pad+14, pts[len(pts)-1].Samples)
	b.WriteString(`<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="`)
	for _, p := range pts {
		fmt.Fprintf(&b, "%.1f,%.1f ", xOf(float64(p.Samples)), yOf(p.Novel))
	}
	b.WriteString(`"/></svg>`)
	return b.String()
}
