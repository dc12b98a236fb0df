// Create a user's SCRAM-SHA-512 credential with the Java Admin (AlterUserScramCredentials),
// then describe it (DescribeUserScramCredentials): for the SASL tests.
//   java ScramUsers BOOTSTRAP PROPERTIES_FILE USER PASSWORD
// PROPERTIES_FILE holds the admin's own client properties (security.protocol, sasl.*, ssl.*).
// Lines: "created <user>", "described <user> <mechanism> <iterations>" per credential, "done";
// "error <text>" and exit 1 on a failure.
import java.io.FileInputStream;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;

public class ScramUsers {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[1])) { props.load(in); }
        props.put("bootstrap.servers", args[0]);
        String user = args[2], password = args[3];
        try (Admin admin = Admin.create(props)) {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password))).all().get();
            System.out.println("created " + user);
            Map<String, UserScramCredentialsDescription> found =
                admin.describeUserScramCredentials(List.of(user)).all().get();
            for (ScramCredentialInfo info : found.get(user).credentialInfos()) {
                System.out.println("described " + user + " " + info.mechanism().mechanismName() + " " + info.iterations());
            }
            System.out.println("done");
        } catch (Exception e) {
            System.out.println("error " + e);
            System.exit(1);
        }
    }
}
