# bytes probability
100 0.1
1000 0.5
10000 0.9
100000 1.0
