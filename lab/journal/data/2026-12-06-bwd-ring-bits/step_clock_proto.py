# Prototype (session 33, not product code): the step clock at which the step's dynamic energy over (cap - static)
# equals its time, from dry runs with --model-clock on a 10 MHz grid; prints each H100 step's x at that clock.
# Run from anywhere with the repository at /work/main and build/dropbench built: python3 step_clock_proto.py
import json, subprocess, sys, tempfile, glob
from pathlib import Path
ROOT=Path('/work/main'); M=json.load(open(ROOT/'configs/machines/h100-sxm.json'))
cap, stat = M['cap_w']['value'], M['static_w']['value']
def dry(cfg, dtype, sq, rounds, clock=None):
    out='/tmp/proto/d.json'
    a=[str(ROOT/'build/dropbench'),'run','--config',str(cfg),'--dry-run','-q','--machine',str(ROOT/'configs/machines/h100-sxm.json'),
       '--set','workload.pass=train','--set',f'workload.dtype={dtype}','--set',f'sweep.sq=[{sq}]','--set',f'sweep.rounds=[{rounds}]','-o',out]
    if clock: a+=['--model-clock',f'{clock:.1f}']
    subprocess.run(a,check=True,capture_output=True,cwd=ROOT)
    d=json.load(open(out)); return {v['name']:v['derived'] for v in d['points'][0]['variants']}
grid=list(range(1200,1981,10))
rows=[]
for path in sorted(glob.glob(str(ROOT/'results/h100/train/train_llama3-*.json'))):
    rep=json.load(open(path)); preset=Path(path).name.split('_')[1]; cfg=ROOT/f'configs/{preset}.json'
    for p in rep['points']:
        w=p['workload']; dt,sq,R=w['dtype'],w['sq'],w['rounds']
        base=dry(cfg,dt,sq,R); curve={f:dry(cfg,dt,sq,R,f) for f in grid}
        for v in p['variants']:
            if ':' in v['name'] or v['name'] not in base: continue
            b=base[v['name']]; edyn=b['model_energy_mj']*1e-3 - stat*b['model_us']*1e-6
            bound=edyn/(cap-stat)
            # largest f with T(f) >= bound
            fs=[f for f in grid if curve[f][v['name']]['model_us']*1e-6 >= bound]
            fstar=max(fs) if fs else grid[0]
            T=curve[fstar][v['name']]['model_us']
            meas=v['stats']['median']*1e6; pw=v.get('power') or {}
            sus=pw.get('time_per_iter_s',0)*1e6 or None
            rows.append(dict(preset=preset,dt=dt,R=R,s=v['name'],fstar=fstar,fmeas=v['stats']['mean_clock_mhz'],
              x=meas/T, xs=(sus/T if sus else None), xold=meas/b['model_us'], xsold=(sus/b['model_us'] if sus else None), pw=pw.get('mean_w')))
for r in rows: print(f"{r['preset']:12s} {r['dt']:4s} R{r['R']} {r['s']:14s} f*={r['fstar']} fmeas={r['fmeas']:.0f} x={r['x']:.3f} xs={r['xs']:.3f} old {r['xold']:.3f}/{r['xsold']:.3f} W={r['pw']:.0f}")
import statistics
for k in ('x','xs','xold','xsold'):
    vals=[r[k] for r in rows if r[k]]; print(k, min(vals), max(vals), sum(abs(v-1)<=0.05 for v in vals), len(vals))
