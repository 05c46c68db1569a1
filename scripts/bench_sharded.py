"""Many ranks, one read each (issue 35's "Measured"): RANKS processes each load their
quarter (by rows) of every tensor of a model served by nginx and by an S3 server, and
the time until all of them have it and the bytes the server sent, against each rank
downloading the whole file with curl and slicing it, Run:ai Model Streamer streaming the
whole file (S3 only: it reads no http:// URL), and the bound (a rank's bytes at the
link's rate, measured with one curl of the file). Medians of interleaved repetitions;
printed, never asserted. Run by scripts/bench-sharded.sh, which starts the servers.

Each rank is a process of its own, started before the clock and held at a start line
until all are ready (imports and interpreter start-up are not timed); the time is from
the first rank's start to the last rank's end. Bytes are what the server logged as sent
(nginx's access log; for S3, the access log of the nginx that fronts the S3 server).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# One rank. argv: method, rank, ranks, source, go-file, options (json). Prints one JSON
# line: its start and end (time.time()) and the bytes it holds.
RANK = r'''
import json, os, sys, time
method, rank, ranks, source, go, opts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5], json.loads(sys.argv[6])
import numpy as np

def rows(n):  # the rank's rows, as torch.chunk (Shard(0)) cuts them
    c = -(-n // ranks); a = min(rank * c, n); return a, min(a + c, n)

if method.startswith("tessera"):
    import tessera
elif method == "curl":
    import subprocess
    from safetensors import safe_open
elif method == "runai":
    import torch
    from runai_model_streamer import SafetensorsStreamer
open(go + f".ready{rank}", "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
t0 = time.time()
held = 0
if method.startswith("tessera"):
    kw = dict(opts.get("read", {}))
    out = tessera.load_slices(source, {"*": ("rows", rank, ranks)}, **kw)
    held = sum(a.nbytes for a in out.values())
elif method == "curl":
    local = opts["download"] + f"/rank{rank}.safetensors"
    subprocess.run(["curl", "-sSf", "-o", local] + opts["curl"] + [source], check=True)
    with safe_open(local, "np") as f:
        for k in f.keys():
            s = f.get_slice(k)
            a, b = rows(s.get_shape()[0])
            held += np.array(s[a:b], copy=True).nbytes
    os.remove(local)
elif method == "runai":
    with SafetensorsStreamer() as st:
        st.stream_file(source)
        for k, t in st.get_tensors():
            a, b = rows(t.shape[0])
            held += t[a:b].clone().nbytes
t1 = time.time()
print(json.dumps({"t0": t0, "t1": t1, "held": held}))
'''


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def log_bytes(path):
    """Body bytes an nginx access log holds ("METHOD URI RANGE STATUS BYTES" lines)."""
    total = n = 0
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if parts and parts[-1].isdigit():
                    total += int(parts[-1])
                    n += 1
    return total, n


def make_model(path, size_mib, tensors, py):
    """A safetensors file of `tensors` f32 tensors, about `size_mib` MiB, written by the
    safetensors package (kept between runs)."""
    if os.path.exists(path):
        return
    code = textwrap.dedent(
        f"""
        import numpy as np, safetensors.numpy
        rng = np.random.default_rng(35)
        per = {size_mib} * 1024 * 1024 // {tensors} // 4
        cols = 1024
        rows = max(4, per // cols // 4 * 4)  # a multiple of 4: every rank's quarter the same
        t = {{f"layers.{{i}}.weight": rng.random((rows, cols), dtype=np.float32) for i in range({tensors})}}
        safetensors.numpy.save_file(t, "{path}.tmp")
        """
    )
    sh([py, "-c", code])
    os.replace(path + ".tmp", path)


def run_ranks(label, method, source, ranks, rank_py, env, opts, logs):
    """One repetition: RANKS processes of `method`, started together; returns (seconds
    from the first start to the last end, bytes the servers sent meanwhile, bytes the
    ranks hold)."""
    go = tempfile.mktemp(prefix="go-", dir=opts["tmp"])
    before = [log_bytes(p)[0] for p in logs]
    script = os.path.join(opts["tmp"], "rank.py")
    with open(script, "w") as f:
        f.write(RANK)
    procs = [
        subprocess.Popen(
            [rank_py, script, method, str(r), str(ranks), source, go, json.dumps(opts)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for r in range(ranks)
    ]
    deadline = time.time() + 300
    while not all(os.path.exists(go + f".ready{r}") for r in range(ranks)):
        if any(p.poll() is not None for p in procs) or time.time() > deadline:
            break
        time.sleep(0.01)
    subprocess.run(["sync"])
    open(go, "w").close()
    outs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=900)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"{label}: a rank failed: {err.strip()[-2000:]}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    for r in range(ranks):
        os.remove(go + f".ready{r}")
    os.remove(go)
    time.sleep(0.2)  # nginx writes its log line after the response
    sent = sum(log_bytes(p)[0] - b for p, b in zip(logs, before))
    return max(o["t1"] for o in outs) - min(o["t0"] for o in outs), sent, sum(o["held"] for o in outs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mib", type=int, default=2048)
    ap.add_argument("--tensors", type=int, default=200)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench-sharded"))
    ap.add_argument("--update-docs", action="store_true", help="write the table into docs/benchmarks.md")
    ap.add_argument("--only", default="", help="comma-separated methods (default: all)")
    a = ap.parse_args()

    py = os.environ.get("TESSERA_BENCH_PYTHON", sys.executable)
    torch_py = os.environ.get("TESSERA_TORCH_PYTHON")
    runai_path = os.environ.get("TESSERA_RUNAI_PATH")
    http_url, http_root, http_log = (os.environ.get(k) for k in ("TESSERA_TEST_HTTP_URL", "TESSERA_TEST_HTTP_ROOT", "TESSERA_TEST_HTTP_LOG"))
    s3_endpoint = os.environ.get("TESSERA_TEST_S3S_ENDPOINT")
    s3_log = os.environ.get("TESSERA_TEST_S3S_LOG")
    bucket = os.environ.get("TESSERA_TEST_S3S_BUCKET", "tessera-bench")
    os.makedirs(a.dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="run-", dir=a.dir)
    # curl's whole-file copies go to memory (/dev/shm) where there is one: no disk write
    # is charged to that peer, and 4 copies of the model need no disk space.
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else tmp
    download = tempfile.mkdtemp(prefix="tessera-bench-", dir=shm)
    name = f"model-{a.size_mib}m-{a.tensors}.safetensors"
    model = os.path.join(a.dir, name)
    make_model(model, a.size_mib, a.tensors, py)
    size = os.path.getsize(model)

    # The quarter's bytes: what the ranks hold (rows as torch.chunk cuts them).
    head = json.loads(subprocess.run(
        [py, "-c", "import json,sys,struct; f=open(sys.argv[1],'rb'); n=struct.unpack('<Q',f.read(8))[0]; print(f.read(n).decode())", model],
        capture_output=True, text=True, check=True).stdout)
    slice_bytes = []
    for r in range(a.ranks):
        total = 0
        for k, v in head.items():
            if k == "__metadata__":
                continue
            n = v["shape"][0]
            c = -(-n // a.ranks)
            lo = min(r * c, n)
            hi = min(lo + c, n)
            per_row = (v["data_offsets"][1] - v["data_offsets"][0]) // max(n, 1)
            total += (hi - lo) * per_row
        slice_bytes.append(total)
    all_slices = sum(slice_bytes)

    sources = {}
    if http_url and http_root:
        dst = os.path.join(http_root, name)
        if not os.path.exists(dst):
            try:
                os.link(model, dst)
            except OSError:
                shutil.copyfile(model, dst)
        sources["nginx"] = (f"{http_url}/{name}", [http_log])
    if s3_endpoint:
        code = textwrap.dedent(
            """
            import sys, boto3, botocore
            ep, bucket, key, path, size = sys.argv[1:6]
            s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1")
            try:
                s3.create_bucket(Bucket=bucket)
            except botocore.exceptions.ClientError:
                pass
            try:
                if s3.head_object(Bucket=bucket, Key=key)["ContentLength"] == int(size):
                    sys.exit(0)
            except botocore.exceptions.ClientError:
                pass
            s3.upload_file(path, bucket, key)  # multipart: the server keeps its ETag
            """
        )
        sh([py, "-c", code, s3_endpoint, bucket, name, model, str(size)])
        sources["S3 (s3s-fs)"] = (f"s3://{bucket}/{name}", [s3_log])

    env = dict(os.environ, OMP_NUM_THREADS="1")
    if s3_endpoint:
        env["AWS_ENDPOINT_URL"] = s3_endpoint
    tessera_env = dict(env, TESSERA_CACHE_DIR=os.path.join(tmp, "cache"))
    runai_env = dict(env, RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING="0", AWS_EC2_METADATA_DISABLED="true",
                     RUNAI_STREAMER_DIST="0", RUNAI_STREAMER_LOG_LEVEL="WARNING")
    if runai_path:
        runai_env["PYTHONPATH"] = runai_path

    has_slices = subprocess.run([py, "-c", "import tessera; tessera.load_slices"], capture_output=True).returncode == 0
    pages = model + ".pages"
    pages_why = "tessera.load_slices is not in this build"
    if has_slices:
        # the manifest, then a probe: one slice read checked against it
        code = (
            "import os, sys, tessera\n"
            "if not os.path.exists(sys.argv[2]): tessera.id(sys.argv[1], pages='1M', output=sys.argv[2])\n"
            "f = tessera.open(sys.argv[1]); n = next(iter(f.keys()))\n"
            "tessera.load_slices(f, {n: ('rows', 0, 4)}, pages=sys.argv[2])\n"
        )
        probe = subprocess.run([py, "-c", code, model, pages], capture_output=True, text=True)
        pages_why = (probe.stderr.strip().splitlines() or ["?"])[-1].replace(pages, os.path.basename(pages))
    has_pages = has_slices and probe.returncode == 0

    notes = []
    if not has_slices:
        notes.append("tessera.load_slices is not in this build: the Tessera rows were not measured")
    if not has_pages:
        notes.append(f"verified slice reads (pages=) not measured: {pages_why}")
    results = {}  # (server, method) -> [(secs, sent, held)]
    rates = {}
    only = set(filter(None, a.only.split(",")))

    def methods_for(server, url, logs):
        out = []
        base = {"tmp": tmp, "download": download}
        if has_slices:
            out.append(("tessera, unverified", "tessera", py, tessera_env, dict(base, read={"verify": False, "cache": False})))
            if has_pages:
                out.append(("tessera, verified (1 MiB pages)", "tessera", py, tessera_env, dict(base, read={"cache": False, "pages": pages})))
        if server == "nginx":
            out.append(("curl whole file + slice", "curl", py, env, dict(base, curl=[])))
        else:
            sig = ["--aws-sigv4", "aws:amz:us-east-1:s3", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--user",
                   f"{os.environ.get('AWS_ACCESS_KEY_ID', 'testing')}:{os.environ.get('AWS_SECRET_ACCESS_KEY', 'testing')}"]
            out.append(("curl whole file + slice", "curl", py, env, dict(base, curl=sig, http=True)))
            if torch_py and runai_path:
                out.append(("Run:ai Model Streamer 0.17.0, whole file", "runai", torch_py, runai_env, base))
        return [m for m in out if not only or m[1] in only]

    plans = []
    for server, (url, logs) in sources.items():
        for m in methods_for(server, url, logs):
            plans.append((server, url, logs, m))
    # the link's rate: one curl of the whole file, per server, each repetition
    for rep in range(a.reps):
        order = plans if rep % 2 == 0 else list(reversed(plans))
        for server, url, logs, (label, method, rank_py, menv, opts) in order:
            src = url
            if method == "curl" and opts.get("http"):
                src = f"{s3_endpoint}/{bucket}/{name}"
            try:
                secs, sent, held = run_ranks(label, method, src, a.ranks, rank_py, menv, opts, logs)
            except RuntimeError as e:
                print(f"  {server} {label}: FAILED: {e}")
                results.setdefault((server, label), []).append(None)
                continue
            results.setdefault((server, label), []).append((secs, sent, held))
            print(f"  rep {rep + 1} {server:12} {label:40} {secs:7.2f} s  sent {sent / 2**20:9.1f} MiB  held {held / 2**20:8.1f} MiB", flush=True)
        for server, (url, logs) in sources.items():
            if server == "nginx":
                cmd = ["curl", "-sSf", "-o", "/dev/null", "-w", "%{time_total}", url]
            else:
                cmd = ["curl", "-sSf", "-o", "/dev/null", "-w", "%{time_total}", "--aws-sigv4", "aws:amz:us-east-1:s3", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                       "--user", f"{os.environ.get('AWS_ACCESS_KEY_ID', 'testing')}:{os.environ.get('AWS_SECRET_ACCESS_KEY', 'testing')}",
                       f"{s3_endpoint}/{bucket}/{name}"]
            t = float(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
            rates.setdefault(server, []).append(size / t)
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(download, ignore_errors=True)

    # The table
    lines = []
    mib = lambda b: f"{b / 2**20:.0f} MiB"
    for server in sources:
        rate = statistics.median(rates[server])
        bound_rank = max(slice_bytes) / rate
        bound_all = all_slices / rate
        lines.append(
            f"| {server} | bound: one rank's slice ({mib(max(slice_bytes))}) at the link's rate ({rate / 1e6:.0f} MB/s, one curl) "
            f"| {bound_rank:.2f} s | {mib(max(slice_bytes))} | – | – |"
        )
        lines.append(
            f"| {server} | bound: all {a.ranks} slices ({mib(all_slices)}) at that rate, one link | {bound_all:.2f} s | {mib(all_slices)} | – | – |"
        )
        for (srv, label), runs in results.items():
            if srv != server:
                continue
            ok = [r for r in runs if r]
            if not ok:
                lines.append(f"| {server} | {label} | failed | – | – | – |")
                continue
            secs = [r[0] for r in ok]
            med = statistics.median(secs)
            sent = statistics.median([r[1] for r in ok])
            lines.append(
                f"| {server} | {label} | {med:.2f} s ({min(secs):.2f}–{max(secs):.2f}) | {mib(sent)} | "
                f"{sent / all_slices:.2f}x | {med / bound_rank:.2f}x / {med / bound_all:.2f}x |"
            )
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = os.getloadavg()[0]
    section = [
        "## Loading at scale: many ranks, one read each (issue 35)",
        "",
        f"Written by `bash scripts/bench-sharded.sh --size-mib {a.size_mib} --tensors {a.tensors} --reps {a.reps} --update-docs` "
        f"({when}); `all` keeps this section as it is. A safetensors model of {a.tensors} f32 tensors, {mib(size)}, "
        f"{a.ranks} ranks (processes on this machine) each taking a quarter of every tensor by rows "
        "(torch.chunk's cut, as `Shard(0)`). Time: from the first rank's start to the last rank's end, "
        "median of the interleaved repetitions (min–max); curl writes its copies to /dev/shm. Sent: body bytes the server logged, "
        "median; ×slices: sent / the slices' bytes. ×bound: time / one rank's slice at the link's rate (the "
        "issue's bound) and / all slices at that rate (one shared link: the ranks share one server and "
        f"this machine's 2 cores). Tessera: {os.environ.get('TESSERA_BENCH_BUILD', 'the installed build')}; "
        f"load average at the end: {load:.1f} (the machine is shared with other jobs: figures move by tens of percent).",
        "",
        "| server | method | time to all ranks loaded | sent | ×slices | ×bound (rank / link) |",
        "| --- | --- | --- | --- | --- | --- |",
        *lines,
    ]
    if notes:
        section += ["", *[f"- {n}" for n in notes]]
    text = "\n".join(section) + "\n"
    print()
    print(text)
    if a.update_docs:
        update_docs(os.path.join(ROOT, "docs", "benchmarks.md"), text)


MARK = "<!-- Sections below are written by their own scripts; `tessera-bench all` keeps them. -->"


def update_docs(path, section):
    """Puts `section` after the marker `tessera-bench all` keeps, replacing an earlier
    section with the same heading."""
    with open(path) as f:
        old = f.read()
    head, _, tail = old.partition(MARK)
    title = section.splitlines()[0]
    kept = []
    if tail:
        blocks = ("\n" + tail).split("\n## ")
        for b in blocks[1:]:
            if ("## " + b).splitlines()[0] != title:
                kept.append("## " + b.rstrip("\n") + "\n")
    new = head.rstrip("\n") + "\n\n" + MARK + "\n\n" + "\n".join(kept + [section])
    with open(path, "w") as f:
        f.write(new)
    print(f"updated {path}")


if __name__ == "__main__":
    main()
