"""scripts/kafka's parts (its usage is the script's docstring).

* `layout`: ports, folders, the broker's configuration templates, the jars' cache;
* `ports`: which controller port each node listens on (outside the kernel's ephemeral
  range, chosen and recorded when the default is not);
* `wire`: a port taken or not, a broker's metadata asked over the Kafka protocol;
* `broker`: one KRaft node (the single broker, or a node of a cluster);
* `cluster`: N nodes on loopback;
* `cli`: the commands.

Standard library only: scripts/kafka runs before the project's virtualenv exists.
"""
