# r3d_18's conv layers per pass (training, batch 1): convcore.Convolution (auto schedule, channels_last_3d)
# against PyTorch (aten.convolution_backward, channels_last_3d and NCDHW, the faster), min of 3 after 2 warm.
import sys, time, torch, convcore
L=[((1,3,16,112,112),(64,3,3,7,7),(1,2,2),(1,3,3)),
   ((1,64,16,56,56),(64,64,3,3,3),(1,1,1),(1,1,1)),
   ((1,64,16,56,56),(128,64,3,3,3),(2,2,2),(1,1,1)),
   ((1,128,8,28,28),(128,128,3,3,3),(1,1,1),(1,1,1)),
   ((1,64,16,56,56),(128,64,1,1,1),(2,2,2),(0,0,0)),
   ((1,128,8,28,28),(256,128,3,3,3),(2,2,2),(1,1,1)),
   ((1,256,4,14,14),(256,256,3,3,3),(1,1,1),(1,1,1)),
   ((1,256,4,14,14),(512,256,3,3,3),(2,2,2),(1,1,1)),
   ((1,512,2,7,7),(512,512,3,3,3),(1,1,1),(1,1,1))]
COUNT=[1,4,1,3,1,1,3,1,3]
def once(f):
    s=time.perf_counter(); f(); return (time.perf_counter()-s)*1e3
def best(f):
    f(); f(); return min(once(f) for _ in range(3))
torch.manual_seed(0)
tot={}
for (xs,ws,st,pd),cnt in zip(L,COUNT):
    x=torch.randn(xs).contiguous(memory_format=torch.channels_last_3d); w=torch.randn(ws)
    conv=convcore.Convolution(padding=pd,stride=st)
    y=conv.forward(x,w); dy=torch.randn_like(y).contiguous(memory_format=torch.channels_last_3d)
    r={}
    r["cc_fwd"]=best(lambda: conv.forward(x,w))
    r["cc_bwd_data"]=best(lambda: conv.backward_data(dy,w,x.shape))
    r["cc_bwd_filter"]=best(lambda: conv.backward_filter(x,dy,w.shape))
    for fmt,xx,dd in (("cl",x,dy),("nc",x.contiguous(),dy.contiguous())):
        ww=w.contiguous(memory_format=torch.channels_last_3d) if fmt=="cl" else w
        r[f"pt_fwd_{fmt}"]=best(lambda: torch.nn.functional.conv3d(xx,ww,None,st,pd))
        r[f"pt_bwd_data_{fmt}"]=best(lambda: torch.ops.aten.convolution_backward(dd,xx,ww,None,st,pd,(1,1,1),False,(0,0,0),1,(True,False,False)))
        r[f"pt_bwd_filter_{fmt}"]=best(lambda: torch.ops.aten.convolution_backward(dd,xx,ww,None,st,pd,(1,1,1),False,(0,0,0),1,(False,True,False)))
    line=[]
    for p in ("fwd","bwd_data","bwd_filter"):
        pt=min(r[f"pt_{p}_cl"],r[f"pt_{p}_nc"]); cc=r[f"cc_{p}"]
        tot.setdefault(p,[0,0]); tot[p][0]+=pt*cnt; tot[p][1]+=cc*cnt
        line.append(f"{p} pt {pt:.1f} cc {cc:.1f} ({pt/cc:.2f}x)")
    sched={k[0]:v for k,v in conv._nd._chosen.items()} if conv._nd else {}
    print(xs[1:],ws,st,"x%d"%cnt," | ".join(line), sched, flush=True)
for p,(a,b) in tot.items(): print(p,"sum pt %.0f cc %.0f %.2fx"%(a,b,a/b))
