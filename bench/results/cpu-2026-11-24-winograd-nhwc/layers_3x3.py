import json, sys, re
for f in sys.argv[1:]:
    d = json.load(open(f))
    for m in d["models"]:
        rows = m.get("layers", [])
        sel = []
        for r in rows:
            pr = r["problem"]
            g = dict((k, int(v)) for k, v in re.findall(r"([a-z]+)(\d+)", pr))
            if g["kh"] == 3 and g["kw"] == 3 and g["sh"] == 1 and g["g"] == 1 and g["ic"] >= 64 :
                sel.append(r)
        if not sel: continue
        sp = [r["speedup"] for r in sel]
        worst = min(sel, key=lambda r: r["speedup"])
        print(f"{m['model']}: {len(sel)} dense 3x3/1 layers with >=64 channels: speedup min {min(sp):.2f} max {max(sp):.2f}; GFLOP/s {min(r['gflops'] for r in sel):.0f}-{max(r['gflops'] for r in sel):.0f}; worst {worst['layer']} {worst['problem']} {worst['algo']} {worst['speedup']:.2f}")
        below = [r for r in sel if r["speedup"] < 1.3]
        for r in below: print("   below 1.3:", r["layer"], r["problem"], r["algo"], r["convcore_ms"], r["pytorch_ms"], r["speedup"])
