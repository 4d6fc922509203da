import numpy as np, pandas as pd
rng=np.random.default_rng(7)
n_items=100
a=rng.lognormal(0.2,0.3,n_items); b=rng.normal(0,1,n_items); c=np.full(n_items,0.0)
ids=[f"q{i:03d}" for i in range(n_items)]
pd.DataFrame({"item_id":ids,"a":a,"b":b,"c":c,"u":1.0}).to_csv("truth.csv",index=False)
def draw(theta, cols):
    P=1/(1+np.exp(-a[cols]*(theta[:,None]-b[cols])))
    return (rng.random(P.shape)<P).astype(int)
N=2000
t1=rng.normal(0,1,N); t2=rng.normal(0.5,1.2,N)
A_cols=np.arange(0,60); B_cols=np.arange(40,100)
for name,t,cols in (("form1",t1,A_cols),("form2",t2,B_cols)):
    X=draw(t,cols)
    df=pd.DataFrame(X,columns=[ids[j] for j in cols]); df.insert(0,"model",[f"{name}_m{i}" for i in range(N)])
    df.to_csv(f"{name}.csv",index=False)
