// The Java Admin's partition reassignment calls (KIP-455), for the issue 25 tests.
//   java Reassign BOOTSTRAP alter TOPIC PARTITION ID,ID,...
//   java Reassign BOOTSTRAP cancel TOPIC PARTITION
//   java Reassign BOOTSTRAP list
// alter/cancel print "altered"/"cancelled"; list prints one line per move in progress,
// "ongoing <topic>-<p> <replicas> adding <ids> removing <ids>"; then "done". A failure prints
// "error <exception>" and exits 1.
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.common.TopicPartition;

public class Reassign {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("default.api.timeout.ms", "30000");
        try (Admin admin = Admin.create(props)) {
            switch (args[1]) {
                case "alter": {
                    List<Integer> replicas = new ArrayList<>();
                    for (String id : args[4].split(","))
                        replicas.add(Integer.parseInt(id));
                    TopicPartition tp = new TopicPartition(args[2], Integer.parseInt(args[3]));
                    admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(replicas))))
                        .all().get();
                    System.out.println("altered");
                    break;
                }
                case "cancel": {
                    TopicPartition tp = new TopicPartition(args[2], Integer.parseInt(args[3]));
                    admin.alterPartitionReassignments(Map.of(tp, Optional.empty())).all().get();
                    System.out.println("cancelled");
                    break;
                }
                case "list": {
                    Map<TopicPartition, PartitionReassignment> moves = admin.listPartitionReassignments().reassignments().get();
                    for (Map.Entry<TopicPartition, PartitionReassignment> e : moves.entrySet())
                        System.out.println("ongoing " + e.getKey() + " " + e.getValue().replicas() + " adding "
                            + e.getValue().addingReplicas() + " removing " + e.getValue().removingReplicas());
                    break;
                }
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
