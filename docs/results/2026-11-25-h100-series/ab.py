import json,sys,glob,statistics,collections,re,os
# usage: ab.py DIR PREFIX  -> groups files PREFIX_<op>_<variant><round>.json
d=sys.argv[1]
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob(os.path.join(d,'ab_*.json')):
    m=re.match(r'ab_(.+)_([a-z0-9]+?)(\d)\.json',os.path.basename(f))
    op,var,r=m.groups()
    for c in json.load(open(f))['cells']:
        if c['status']!='ok': print('NOT OK',f,c['shape'],c.get('message')); continue
        res[(c['op'],tuple(c['shape']))][var].append((c['median_us'],c.get('bw_frac')))
vs=sorted({v for k in res for v in res[k]})
print('op shape', *[f'{v}:med(us) bw' for v in vs], 'ratio(last/first)')
import math
for k in sorted(res):
    meds=[statistics.median([x[0] for x in res[k][v]]) for v in vs]
    bws=[statistics.median([x[1] for x in res[k][v]]) for v in vs]
    print(k[0], 'x'.join(map(str,k[1])), *[f'{m:9.1f} {b:.2f}' for m,b in zip(meds,bws)], f'{meds[0]/meds[-1]:.3f}')
