package bench

import (
	"encoding/json"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"time"
)

// writeReport writes result.json, report.md and one plot per run into out.
func writeReport(out string, res *Result) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	resultPath, reportPath := reportPaths(out)
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(resultPath, data, 0o644); err != nil {
		return err
	}
	for _, run := range res.Runs {
		if err := plotCompletions(filepath.Join(out, plotName(run.N)), run); err != nil {
			return fmt.Errorf("plotting N=%d: %w", run.N, err)
		}
	}
	return os.WriteFile(reportPath, []byte(Markdown(res)), 0o644)
}

func plotName(n int) string { return fmt.Sprintf("completions-%d.png", n) }

// plotCompletions draws completed Jobs over time for every arm of a run.
func plotCompletions(path string, run Run) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d one-pod Jobs: completed over time", run.N)
	p.X.Label.Text = "seconds since the first create"
	p.Y.Label.Text = "Jobs Complete"
	p.Legend.Top = false
	p.Legend.Left = false
	p.Add(plotter.NewGrid())
	type curve struct {
		name   string
		times  []float64
		colour color.Color
	}
	curves := []curve{
		{fmt.Sprintf("direct (%.1f Jobs/s)", run.Direct.Throughput), run.Direct.Completions, color.RGBA{R: 0x33, G: 0x66, B: 0xcc, A: 0xff}},
		{fmt.Sprintf("jobferry (%.1f Jobs/s)", run.Jobferry.Throughput), run.Jobferry.Completions, color.RGBA{R: 0xdd, G: 0x55, B: 0x11, A: 0xff}},
	}
	if len(run.Direct.Completions) == 0 {
		// A simulated run has no direct arm.
		curves = curves[1:]
		p.Title.Text = fmt.Sprintf("%d one-pod Jobs on simulated workers: completed over time", run.N)
	}
	if run.Kueue != nil {
		curves = append(curves, curve{fmt.Sprintf("Kueue + jobferry (%.1f Jobs/s)", run.Kueue.Throughput), run.Kueue.Completions, color.RGBA{R: 0x22, G: 0x99, B: 0x44, A: 0xff}})
	}
	if run.MultiKueue != nil {
		curves = append(curves, curve{fmt.Sprintf("MultiKueue (%.1f Jobs/s)", run.MultiKueue.Throughput), run.MultiKueue.Completions, color.RGBA{R: 0x88, G: 0x44, B: 0xaa, A: 0xff}})
	}
	for _, arm := range curves {
		points := make(plotter.XYs, len(arm.times))
		for i, t := range arm.times {
			points[i] = plotter.XY{X: t, Y: float64(i + 1)}
		}
		line, err := plotter.NewLine(points)
		if err != nil {
			return err
		}
		line.Color = arm.colour
		line.Width = vg.Points(1.5)
		line.StepStyle = plotter.PostStep
		p.Add(line)
		p.Legend.Add(arm.name, line)
	}
	p.Legend.ThumbnailWidth = vg.Points(20)
	p.Legend.Padding = vg.Points(4)
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// Markdown renders a run as the report README.md quotes.
func Markdown(res *Result) string {
	if res.Simulated != nil {
		return simMarkdown(res)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# jobferry bench, %s\n\n", res.Started.Format("2006-01-02 15:04 UTC"))
	split := "not split (every process may use every CPU)"
	if res.ManagerCPUs != "" {
		split = fmt.Sprintf("manager cluster on CPU %s, workers on CPU %s", res.ManagerCPUs, res.WorkerCPUs)
	}
	fmt.Fprintf(&b, "%d worker clusters (2 KWOK nodes, 220 pod slots each; KWOK, standing in for the nodes' kubelets, at nice %d: the cycles the workers' control planes leave), %d host CPUs, %s. One-pod Jobs that run 1 s; every figure observed through watches. Once all are Complete each arm deletes its Jobs one by one, as their user or their TTL would (the direct arm on the workers, the jobferry arm on the manager), and writes and CPU include that clean-up.", res.Workers, nodesNice, res.HostCPUs, split)
	if res.Kueue {
		fmt.Fprintf(&b, " Kueue runs on the manager cluster (its CPUs) throughout, the manager with `--kueue`; the Kueue arm queues the same Jobs in one LocalQueue whose ClusterQueue has quota for all of them at once and names jobferry's admission check: Kueue reserves quota, jobferry places the Job, Kueue admits and unsuspends it, jobferry creates the mirror.")
	}
	if res.CreateIntervalSeconds > 0 {
		fmt.Fprintf(&b, " Every arm creates its Jobs one every %.0f ms (latency, not throughput: the Jobs/s below are bound by that pace).", res.CreateIntervalSeconds*1000)
	}
	if res.ArmLimitSeconds > 0 {
		fmt.Fprintf(&b, " Every arm had %s for its Jobs to complete; an arm that ran out is reported as far as it got.", time.Duration(res.ArmLimitSeconds*float64(time.Second)))
	}
	if len(res.ManagerArgs) > 0 {
		fmt.Fprintf(&b, " Manager flags: `%s`.", strings.Join(res.ManagerArgs, " "))
	}
	if len(res.ManagerEnv) > 0 {
		fmt.Fprintf(&b, " Manager environment: `%s`.", strings.Join(res.ManagerEnv, " "))
	}
	b.WriteString("\n\n")
	b.WriteString("| N | direct Jobs/s | jobferry Jobs/s | ratio | create→Complete p50 / p99 (direct) | create→Complete p50 / p99 (jobferry) | dispatch overhead p50 / p95 / p99 / max | status-copy lag p50 / p95 / p99 / max |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		d, j := r.Direct, r.Jobferry
		fmt.Fprintf(&b, "| %d | %s | %s | %.2f | %.1f s / %.1f s | %.1f s / %.1f s | %s | %s |\n", r.N, throughputText(d), throughputText(j), r.Ratio,
			d.CreateToComplete.P50, d.CreateToComplete.P99, j.CreateToComplete.P50, j.CreateToComplete.P99,
			fourPercentiles(j.DispatchOverhead), fourPercentiles(j.StatusCopyLag))
	}
	b.WriteString("\nThe dispatch overhead in two parts: waiting on the manager for a worker with room (created → the manager Job shows its worker), and the pipeline after placement (→ mirror seen on the worker):\n\n")
	b.WriteString("| N | waiting for room p50 / p95 / p99 / max | placed → mirror seen p50 / p95 / p99 / max |\n|---|---|---|\n")
	for _, r := range res.Runs {
		fmt.Fprintf(&b, "| %d | %s | %s |\n", r.N, fourPercentiles(r.Jobferry.PlacementWait), fourPercentiles(r.Jobferry.MirrorAfterPlacement))
	}
	b.WriteString("\n| N | writes/Job manager (jobferry) | writes/Job workers (direct) | writes/Job workers (jobferry) | added on workers | manager CPU-s/Job | manager peak RSS | RSS/Job | clean-up: every Job deleted → workers empty (direct / jobferry) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		dw, jw := workersTotal(r.Direct), workersTotal(r.Jobferry)
		cleanUp := fmt.Sprintf("%.1f s / %.1f s", r.Direct.CleanUpSeconds, r.Jobferry.CleanUpSeconds)
		if r.Jobferry.SettleSeconds > 0 {
			cleanUp += fmt.Sprintf(" (finished mirrors deleted %.1f s after the last Complete)", r.Jobferry.SettleSeconds)
		}
		fmt.Fprintf(&b, "| %d | %.2f | %.2f | %.2f | %+.2f | %.4f | %.0f MiB | %.1f KiB | %s |\n", r.N,
			r.Jobferry.WritesTotal["manager"], dw, jw, jw-dw, r.Jobferry.CPU[managerProcess],
			float64(r.Jobferry.ManagerPeakRSS)/(1<<20), r.Jobferry.ManagerRSSPerJob/1024, cleanUp)
	}
	if res.Kueue {
		kueueTables(&b, res.Runs)
	}
	if res.KueueAlone {
		kueueSplit(&b, res.Runs)
	}
	if res.MultiKueue {
		fourArms(&b, res)
	}
	if res.InspectionLoad != nil {
		inspectionTable(&b, res)
	}
	for _, r := range res.Runs {
		fmt.Fprintf(&b, "\n## N = %d\n\n![completed Jobs over time](%s)\n\n", r.N, plotName(r.N))
		arms := armNames(r)
		b.WriteString("Writes per Job by cluster, resource and verb (`apiserver_request_total`, write verbs; workers summed):\n\n")
		fmt.Fprintf(&b, "| cluster | resource, verb | %s |\n|---|---|%s\n", strings.Join(arms, " | "), strings.Repeat("---|", len(arms)))
		for _, row := range writeRows(r) {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", row.cluster, row.resource, row.columns("%.2f"))
		}
		fmt.Fprintf(&b, "\nEvents per Job by cluster and reason:\n\n| cluster/reason | %s |\n|---|%s\n", strings.Join(arms, " | "), strings.Repeat("---|", len(arms)))
		for _, row := range eventRows(r) {
			fmt.Fprintf(&b, "| %s | %s |\n", row.cluster, row.columns("%.2f"))
		}
		if rows := webhookRows(r); len(rows) > 0 {
			fmt.Fprintf(&b, "\nAdmission webhook calls per Job by cluster, webhook and operation (`apiserver_admission_webhook_admission_duration_seconds`):\n\n| cluster/webhook operation | %s |\n|---|%s\n", strings.Join(arms, " | "), strings.Repeat("---|", len(arms)))
			for _, row := range rows {
				fmt.Fprintf(&b, "| %s | %s |\n", row.cluster, row.columns("%.2f"))
			}
		}
		managerFigures(&b, r.N, "jobferry", r.Jobferry)
		if r.Kueue != nil {
			managerFigures(&b, r.N, "Kueue", *r.Kueue)
		}
		if a := r.MultiKueue; a != nil && a.APIServerProfileTop != "" {
			fmt.Fprintf(&b, "\nThe manager cluster's API server's CPU profile, first %d s of the MultiKueue arm (`%s`):\n\n```\n%s```\n", profileSeconds, filepath.Base(a.APIServerProfile), a.APIServerProfileTop)
		}
		fmt.Fprintf(&b, "\nCPU seconds per Job by process (workers summed):\n\n| process | %s |\n|---|%s\n", strings.Join(arms, " | "), strings.Repeat("---|", len(arms)))
		for _, row := range cpuRows(r) {
			fmt.Fprintf(&b, "| %s | %s |\n", row.cluster, row.columns("%.4f"))
		}
	}
	return b.String()
}

// managerFigures writes what the manager's metrics and profiles showed
// during the jobferry or the Kueue arm of a run for n.
func managerFigures(b *strings.Builder, n int, arm string, a Arm) {
	if q := a.Queue; q != nil {
		fmt.Fprintf(b, "\nThe manager's Job work queue in the %s arm: %.1f reconciles per Job; queue wait p50 %.2f s, p99 %.2f s; reconcile p50 %.3f s, p99 %.3f s, mean %.3f s (from the `workqueue_*_duration_seconds` histograms). Status copies: %.2f per Job, from the mirror's change seen to the write p50 %.3f s, p99 %.3f s, running copies included (`jobferry_status_sync_lag_seconds`).\n",
			arm, q.ReconcilesPerJob, q.WaitP50, q.WaitP99, q.WorkP50, q.WorkP99, q.WorkMean, q.CopiesPerJob, q.CopyLagP50, q.CopyLagP99)
	}
	if a.ProfileTop != "" {
		fmt.Fprintf(b, "\nThe manager's CPU profile, first %d s of the %s arm (`%s`):\n\n```\n%s```\n", profileSeconds, arm, filepath.Base(a.Profile), a.ProfileTop)
	}
	if a.APIServerProfileTop != "" {
		fmt.Fprintf(b, "\nThe manager cluster's API server's CPU profile over the same seconds (`%s`; it shares the manager's CPU):\n\n```\n%s```\n", filepath.Base(a.APIServerProfile), a.APIServerProfileTop)
	}
	if a.HeapTop != "" {
		fmt.Fprintf(b, "\nIn the %s arm, the manager's live heap once all %d Jobs were Complete grew by %.1f KiB per Job (HeapAlloc after a collection; the RSS adds the collector's headroom). What holds it (`%s`, in-use space):\n\n```\n%s```\n",
			arm, n, a.ManagerLiveHeapPerJob/1024, filepath.Base(a.HeapProfile), a.HeapTop)
	}
}

// inspectionTable writes how dispatch fared while tenants followed logs,
// against the quiet arms of the same run around it.
func inspectionTable(b *strings.Builder, res *Result) {
	load := res.InspectionLoad
	fmt.Fprintf(b, "\nDispatch while tenants follow logs: the workers are registered with the worker chart's identity for the manager (its inspection FlowSchema, API Priority and Fairness applying as on an installation); %d tenants each run a Job of %d pods from before the jobferry arm until the last arm ended. After the jobferry arm come %d rounds of a followed arm, during which each tenant follows the logs of all its pods (`kubectl jobferry logs --all-pods -f`, the real plugin, as the tenant, unpinned as the bench's own clients are: a 2-CPU host has no third CPU for the tenants' machines) while every container prints %.0f lines a second, and a quiet arm after it, nobody following: quiet arms on both sides of every followed one. The Jobs of every arm come one every %.0f ms. Dispatch overhead is created on the manager → mirror seen on its worker, pooled over the quiet arms (the jobferry arm and every after arm) and over the followed arms:\n\n",
		load.Tenants, load.PodsEach, load.Rounds, load.LinesPerSecond, res.CreateIntervalSeconds*1000)
	b.WriteString("| N | dispatch overhead p50 / p95 / p99 / max (Jobs): quiet arms | followed arms | p99 ratio followed / quiet | p50 ratio | quiet arms' p99s, largest / smallest |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		if i := r.Inspection; i != nil {
			fmt.Fprintf(b, "| %d | %s (%d) | %s (%d) | %s | %s | %s |\n", r.N, fourPercentiles(i.Quiet), i.Quiet.Count, fourPercentiles(i.Following), i.Following.Count,
				ratioText(i.DispatchP99Ratio), ratioText(i.DispatchP50Ratio), ratioText(i.QuietP99Spread))
		}
	}
	b.WriteString("\nRound by round (the quiet arm before round 1 is the jobferry arm; the streams open at the end printed a line appended once the followed arm ended):\n\n")
	b.WriteString("| N | round | dispatch overhead p50 / p95 / p99 / max: quiet before | followed | quiet after | p99 ratio to its neighbours' mean | lines streamed of expected | streams open at the end | the tenants' plugins, CPU-s | manager CPU-s/Job (before / followed / after) | manager peak RSS (before / followed / after) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		i := r.Inspection
		if i == nil {
			continue
		}
		before := r.Jobferry
		for k, round := range i.PerRound {
			fmt.Fprintf(b, "| %d | %d | %s | %s | %s | %s | %d of %d (%.0f/s) | %d of %d | %.1f | %.4f / %.4f / %.4f | %.0f / %.0f / %.0f MiB |\n", r.N, k+1,
				fourPercentiles(before.DispatchOverhead), fourPercentiles(round.Followed.DispatchOverhead), fourPercentiles(round.After.DispatchOverhead),
				ratioText(round.P99Ratio), round.LinesStreamed, round.LinesExpected, round.StreamedPerSecond,
				round.StreamsOpen, i.Tenants*int(i.PodsEach), round.FollowersCPU, before.CPU[managerProcess], round.Followed.CPU[managerProcess], round.After.CPU[managerProcess],
				float64(before.ManagerPeakRSS)/(1<<20), float64(round.Followed.ManagerPeakRSS)/(1<<20), float64(round.After.ManagerPeakRSS)/(1<<20))
			before = round.After
		}
	}
}

// ratioText is a ratio of percentiles, or – when its base was 0.
func ratioText(r float64) string {
	if r == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", r)
}

// kueueTables writes the Kueue arm's figures beside the jobferry arm's:
// throughput, the latency Kueue adds and where it goes, and its cost.
func kueueTables(b *strings.Builder, runs []Run) {
	b.WriteString("\nThe Kueue arm: the same Jobs queued through Kueue (ample quota), against direct submission and the jobferry arm of the same run; \"added\" is the Kueue arm's create→Complete percentile minus the jobferry arm's:\n\n")
	b.WriteString("| N | Kueue arm Jobs/s | ratio to direct | ratio to jobferry | create→Complete p50 / p99 | added p50 / p99 | dispatch overhead p50 / p95 / p99 / max | status-copy lag p50 / p95 / p99 / max |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		if r.Kueue == nil {
			continue
		}
		k, j := r.Kueue, r.Jobferry
		fmt.Fprintf(b, "| %d | %.1f | %.2f | %.2f | %.1f s / %.1f s | %+.1f s / %+.1f s | %s | %s |\n", r.N, k.Throughput, r.KueueRatio, r.KueueToJobferry,
			k.CreateToComplete.P50, k.CreateToComplete.P99, k.CreateToComplete.P50-j.CreateToComplete.P50, k.CreateToComplete.P99-j.CreateToComplete.P99,
			fourPercentiles(k.DispatchOverhead), fourPercentiles(k.StatusCopyLag))
	}
	b.WriteString("\nThe Kueue arm's dispatch overhead in four parts: Kueue reserving quota (created → its Workload shows QuotaReserved), jobferry waiting for a worker with room (→ the manager Job shows its worker), Kueue admitting it once jobferry's check is Ready (→ the Job unsuspended), and jobferry creating the mirror (→ mirror seen on the worker):\n\n")
	b.WriteString("| N | created → quota reserved p50 / p95 / p99 / max | quota reserved → placed | placed → admitted (unsuspended) | admitted → mirror seen |\n|---|---|---|---|---|\n")
	for _, r := range runs {
		if k := r.Kueue; k != nil {
			fmt.Fprintf(b, "| %d | %s | %s | %s | %s |\n", r.N, fourPercentiles(k.QuotaWait), fourPercentiles(k.PlacementAfterQuota),
				fourPercentiles(k.AdmissionAfterPlacement), fourPercentiles(k.MirrorAfterAdmission))
		}
	}
	b.WriteString("\n| N | writes/Job manager (jobferry arm → Kueue arm) | writes/Job workers (jobferry arm → Kueue arm) | Kueue CPU-s/Job (Kueue arm; jobferry arm) | jobferry manager CPU-s/Job (jobferry arm → Kueue arm) | manager API server CPU-s/Job (jobferry arm → Kueue arm) | clean-up (Kueue arm) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		k, j := r.Kueue, r.Jobferry
		if k == nil {
			continue
		}
		fmt.Fprintf(b, "| %d | %.2f → %.2f | %.2f → %.2f | %.4f; %.4f | %.4f → %.4f | %.4f → %.4f | %.1f s |\n", r.N,
			j.WritesTotal["manager"], k.WritesTotal["manager"], workersTotal(j), workersTotal(*k),
			k.CPU[kueueProcess], j.CPU[kueueProcess], j.CPU[managerProcess], k.CPU[managerProcess],
			j.CPU[apiServerProcess], k.CPU[apiServerProcess], k.CleanUpSeconds)
	}
}

// kueueSplit divides the Kueue arm's manager cluster, CPU and writes per
// Job, into what jobferry costs alone (the jobferry arm's manager cluster,
// the same Jobs with Kueue idle), what Kueue costs alone (the Kueue-alone
// arm's workers less the direct arm's: Kueue's own work with no admission
// check) and what the two add together (the rest: jobferry's work for
// Kueue and Kueue's for jobferry's check and writes).
func kueueSplit(b *strings.Builder, runs []Run) {
	b.WriteString("\nThe Kueue arm's manager cluster split: jobferry alone is the jobferry arm's manager cluster (the same Jobs, Kueue idle); Kueue alone is what Kueue adds to a cluster admitting the same Jobs without an admission check (the Kueue-alone arm's workers less the direct arm's: Kueue on each worker, a ClusterQueue with quota for all the Jobs and no check); together is the rest: what jobferry does for Kueue (the queue recorded, the check written, a second dry-run) and what Kueue does because of jobferry (its check, its writes on queued Jobs). Every figure per Job, each cluster's every process:\n\n")
	b.WriteString("| N | Kueue arm CPU-s/Job | = jobferry alone | + Kueue alone | + together | jobferry's manager process (share) | Kueue's process: alone → in the Kueue arm | writes/Job: Kueue arm = jobferry alone + Kueue alone + together |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		k, alone := r.Kueue, r.KueueAlone
		if k == nil || alone == nil {
			continue
		}
		total, jobferry := clusterCPU(k.CPU, true), clusterCPU(r.Jobferry.CPU, true)
		kueueOwn := clusterCPU(alone.CPU, false) - clusterCPU(r.Direct.CPU, false)
		together := total - jobferry - kueueOwn
		writes, jobferryWrites := k.WritesTotal["manager"], r.Jobferry.WritesTotal["manager"]
		kueueWrites := workersTotal(*alone) - workersTotal(r.Direct)
		fmt.Fprintf(b, "| %d | %.4f | %.4f (%.0f %%) | %.4f (%.0f %%) | %.4f (%.0f %%) | %.4f (%.0f %%) | %.4f → %.4f | %.2f = %.2f + %.2f + %.2f |\n", r.N,
			total, jobferry, share(jobferry, total), kueueOwn, share(kueueOwn, total), together, share(together, total),
			k.CPU[managerProcess], share(k.CPU[managerProcess], total), workersProcessCPU(alone.CPU, "kueue"), k.CPU[kueueProcess],
			writes, jobferryWrites, kueueWrites, writes-jobferryWrites-kueueWrites)
	}
}

// share is part as a percentage of whole (0 when whole is).
func share(part, whole float64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * part / whole
}

// workersProcessCPU sums a process's CPU seconds per Job over the workers.
func workersProcessCPU(cpu map[string]float64, process string) float64 {
	total := 0.0
	for key, v := range cpu {
		cluster, name, _ := strings.Cut(key, "/")
		if cluster != "manager" && name == process {
			total += v
		}
	}
	return total
}

// The processes of the manager cluster the reports single out, as
// processCPU keys them.
const (
	managerProcess   = "manager/jobferry-manager"
	kueueProcess     = "manager/kueue"
	apiServerProcess = "manager/kube-apiserver"
)

// namedArm is an arm of a run and its column head.
type namedArm struct {
	name string
	arm  Arm
}

// jobferryColumn is where runArms puts the jobferry arm.
const jobferryColumn = 1

// runArms are the arms a run has, in the order of its per-arm tables'
// columns.
func runArms(r Run) []namedArm {
	arms := []namedArm{{"direct", r.Direct}, {"jobferry", r.Jobferry}}
	if r.Kueue != nil {
		arms = append(arms, namedArm{"Kueue", *r.Kueue})
	}
	if r.KueueAlone != nil {
		arms = append(arms, namedArm{"Kueue alone", *r.KueueAlone})
	}
	if r.MultiKueue != nil {
		arms = append(arms, namedArm{"MultiKueue", *r.MultiKueue})
	}
	return arms
}

// armNames are the column heads of a run's per-arm tables.
func armNames(r Run) []string {
	var names []string
	for _, a := range runArms(r) {
		names = append(names, a.name)
	}
	return names
}

func fourPercentiles(p Percentiles) string {
	if p.Count == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f / %.2f s", p.P50, p.P95, p.P99, p.Max)
}

// workersTotal is an arm's writes per Job on all workers together.
func workersTotal(a Arm) float64 {
	total := 0.0
	for cluster, v := range a.WritesTotal {
		if cluster != "manager" {
			total += v
		}
	}
	return total
}

type row struct {
	cluster, resource string
	// values are each arm's figure, in runArms' order.
	values []float64
}

// columns formats the row's figure of each arm, as armNames heads them.
func (x row) columns(format string) string {
	cols := make([]string, len(x.values))
	for i, v := range x.values {
		cols[i] = fmt.Sprintf(format, v)
	}
	return strings.Join(cols, " | ")
}

// top is the row's largest figure.
func (x row) top() float64 { return slices.Max(x.values) }

// clusterGroup folds worker-N into "workers".
func clusterGroup(name string) string {
	if name == "manager" {
		return name
	}
	return "workers"
}

// writeRows lists writes per Job by cluster group and resource.
func writeRows(r Run) []row {
	flat := func(a Arm) map[string]float64 {
		out := map[string]float64{}
		for cluster, resources := range a.Writes {
			for resource, v := range resources {
				out[cluster+"/"+resource] += v
			}
		}
		return out
	}
	return tableRows(r, flat, true)
}

// cpuRows lists CPU seconds per Job by process, workers' processes summed.
func cpuRows(r Run) []row {
	return tableRows(r, func(a Arm) map[string]float64 { return a.CPU }, false)
}

// eventRows lists Events per Job by cluster group and reason.
func eventRows(r Run) []row {
	return tableRows(r, func(a Arm) map[string]float64 { return a.Events }, false)
}

// webhookRows lists admission webhook calls per Job by cluster group,
// webhook and operation.
func webhookRows(r Run) []row {
	return tableRows(r, func(a Arm) map[string]float64 { return a.WebhookCalls }, false)
}

// tableRows sums every arm's "cluster/what" figures by cluster group (the
// workers together) and what; split puts what into its own column.
func tableRows(r Run, values func(Arm) map[string]float64, split bool) []row {
	byKey := map[[2]string]*row{}
	arms := runArms(r)
	for i, a := range arms {
		for key, v := range values(a.arm) {
			cluster, what, _ := strings.Cut(key, "/")
			k := [2]string{clusterGroup(cluster), what}
			if !split {
				k = [2]string{clusterGroup(cluster) + "/" + what, ""}
			}
			if byKey[k] == nil {
				byKey[k] = &row{cluster: k[0], resource: k[1], values: make([]float64, len(arms))}
			}
			byKey[k].values[i] += v
		}
	}
	return sortedRows(byKey)
}

func sortedRows(byKey map[[2]string]*row) []row {
	var rows []row
	for _, r := range byKey {
		if top := r.top(); top >= 0.01 || (r.resource == "" && top > 0) {
			rows = append(rows, *r)
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].cluster != rows[j].cluster {
			return rows[i].cluster < rows[j].cluster
		}
		return rows[i].top() > rows[j].top()
	})
	return slices.Clip(rows)
}

// fourArms writes every arm of each run side by side, the MultiKueue arm
// among them, and how the Kueue arm compares with MultiKueue's.
func fourArms(b *strings.Builder, res *Result) {
	qps := "50, burst 100"
	if res.KueueClientQPS > 0 {
		qps = fmt.Sprintf("%d, burst %d", res.KueueClientQPS, res.KueueClientQPS)
	}
	fmt.Fprintf(b, "\nAll four arms side by side. The MultiKueue arm runs Kueue v0.17 on every worker too (on the workers' CPUs, from the first MultiKueue arm on: the arms before it run without it) and queues the same Jobs on the manager in a ClusterQueue naming MultiKueue's admission check (a MultiKueueConfig of every worker, a MultiKueueCluster and kubeconfig Secret each) with the workers' quota together; each worker's ClusterQueue has the quota of its nodes. The bench creates those Jobs suspended with `spec.managedBy: kueue.x-k8s.io/multikueue`, as Kueue's webhook would. Every Kueue's clientConnection to its own cluster: QPS %s; MultiKueue's clients of the workers run at client-go's defaults (5 QPS, burst 10), which Kueue v0.17 offers no setting for (v0.20 raised them to 1000). Create → running is until the Job or its copy on a worker was first seen with a ready pod (`status.ready`): when its work started (count: the Jobs seen so); CPU is every process of the cluster(s).\n\n", qps)
	b.WriteString("| N | arm | Jobs/s | × direct | create→running p50 / p99 (count) | create→Complete p50 / p99 | status-copy lag p50 / p99 | writes/Job manager / workers | CPU-s/Job manager cluster / workers | Jobs per worker (most running at once) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		arms := []struct {
			name string
			a    *Arm
		}{{"direct", &r.Direct}, {"jobferry", &r.Jobferry}, {"Kueue + jobferry", r.Kueue}, {"MultiKueue", r.MultiKueue}}
		for _, arm := range arms {
			a := arm.a
			if a == nil {
				continue
			}
			lag := "–"
			if a.StatusCopyLag.Count > 0 {
				lag = fmt.Sprintf("%.2f / %.2f s", a.StatusCopyLag.P50, a.StatusCopyLag.P99)
			}
			name := arm.name
			if a.Unfinished != "" {
				name += " (unfinished: " + a.Unfinished + ")"
			}
			fmt.Fprintf(b, "| %d | %s | %.1f | %.2f | %.1f / %.1f s (%d) | %.1f / %.1f s | %s | %.2f / %.2f | %.4f / %.4f | %s |\n", r.N, name, a.Throughput, ratio(a.Throughput, r.Direct.Throughput),
				a.CreateToRunning.P50, a.CreateToRunning.P99, a.CreateToRunning.Count, a.CreateToComplete.P50, a.CreateToComplete.P99, lag,
				a.WritesTotal["manager"], workersTotal(*a), clusterCPU(a.CPU, true), clusterCPU(a.CPU, false), workerSpread(a.Placement))
		}
	}
	b.WriteString("\nKueue + jobferry against MultiKueue in the same run (the goal: at least 2× the Jobs/s, at most 0.5× the create → running p99):\n\n| N | Jobs/s, Kueue + jobferry / MultiKueue | create→running p99, Kueue + jobferry / MultiKueue | MultiKueue: created → quota reserved on the manager p50 / p95 / p99 / max | created → Job seen on a worker |\n|---|---|---|---|---|\n")
	for _, r := range res.Runs {
		if r.Kueue == nil || r.MultiKueue == nil {
			continue
		}
		m := r.MultiKueue
		n := strconv.Itoa(r.N)
		if m.Unfinished != "" {
			n += " (MultiKueue unfinished: " + m.Unfinished + "; its figures are of those)"
		}
		fmt.Fprintf(b, "| %s | %.2f× | %s× | %s | %s |\n", n, r.KueueToMultiKueue, ratioText(ratio(r.Kueue.CreateToRunning.P99, m.CreateToRunning.P99)),
			fourPercentiles(m.QuotaWait), fourPercentiles(m.DispatchOverhead))
	}
}

// throughputText is an arm's Jobs/s, saying how far it got when its time
// ran out (the rate is then of the Jobs Complete by then).
func throughputText(a Arm) string {
	if a.Unfinished == "" {
		return fmt.Sprintf("%.1f", a.Throughput)
	}
	return fmt.Sprintf("%.1f (unfinished: %s)", a.Throughput, a.Unfinished)
}

// clusterCPU sums CPU seconds per Job over the manager cluster's processes
// (manager) or every worker's.
func clusterCPU(cpu map[string]float64, manager bool) float64 {
	total := 0.0
	for key, v := range cpu {
		cluster, _, _ := strings.Cut(key, "/")
		if (cluster == "manager") == manager {
			total += v
		}
	}
	return total
}

// workerSpread is how many of an arm's Jobs ran on each worker, and the most at
// once there ("–" for the direct arm, which splits them evenly itself).
func workerSpread(p *Placement) string {
	if p == nil {
		return "–"
	}
	var parts []string
	for _, w := range p.Workers {
		parts = append(parts, fmt.Sprintf("%s %d (%d)", w.Worker, w.Placed, w.PeakRunning))
	}
	return strings.Join(parts, ", ")
}
