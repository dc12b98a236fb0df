// The Java Admin against the metadata quorum's voters (KIP-853): for the issue 25 tests.
//   java RaftVoters BOOTSTRAP describe
//   java RaftVoters BOOTSTRAP add ID DIRECTORY_ID HOST PORT
//   java RaftVoters BOOTSTRAP remove ID DIRECTORY_ID
// describe prints "leader <id> <epoch>", "voter <id> <directory>", "observer <id> <directory>",
// "node <id> <host>:<port>"; add/remove print "added"/"removed"; then "done". A failure prints
// "error <exception>" and exits 1.
import java.util.Properties;
import java.util.Set;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RaftVoterEndpoint;
import org.apache.kafka.common.Uuid;

public class RaftVoters {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("default.api.timeout.ms", "30000");
        try (Admin admin = Admin.create(props)) {
            switch (args[1]) {
                case "describe": {
                    QuorumInfo info = admin.describeMetadataQuorum().quorumInfo().get();
                    System.out.println("leader " + info.leaderId() + " " + info.leaderEpoch());
                    for (QuorumInfo.ReplicaState v : info.voters())
                        System.out.println("voter " + v.replicaId() + " " + v.replicaDirectoryId());
                    for (QuorumInfo.ReplicaState o : info.observers())
                        System.out.println("observer " + o.replicaId() + " " + o.replicaDirectoryId());
                    for (QuorumInfo.Node n : info.nodes().values())
                        for (RaftVoterEndpoint e : n.endpoints())
                            System.out.println("node " + n.nodeId() + " " + e.host() + ":" + e.port());
                    break;
                }
                case "add":
                    admin.addRaftVoter(Integer.parseInt(args[2]), Uuid.fromString(args[3]),
                        Set.of(new RaftVoterEndpoint("PLAINTEXT", args[4], Integer.parseInt(args[5])))).all().get();
                    System.out.println("added");
                    break;
                case "remove":
                    admin.removeRaftVoter(Integer.parseInt(args[2]), Uuid.fromString(args[3])).all().get();
                    System.out.println("removed");
                    break;
                default:
                    throw new IllegalArgumentException(args[1]);
            }
            System.out.println("done");
        } catch (Exception e) {
            System.out.println("error " + e);
            System.exit(1);
        }
    }
}
