// The Java Admin as a super user: create a user (AlterUserScramCredentials, SCRAM-SHA-256) and
// the ACLs it needs to write and read a topic and use a group (CreateAcls), describe them
// (DescribeAcls), or delete every ACL of the user (DeleteAcls): for the ACL tests.
//   java AclAdmin BOOTSTRAP PROPERTIES_FILE create USER PASSWORD TOPIC GROUP
//   java AclAdmin BOOTSTRAP PROPERTIES_FILE delete USER
// Lines: "created <user>", "acl <resource type> <name> <pattern> <operation> <permission>" per ACL
// described, "deleted <n>", "done"; "error <text>" and exit 1 on a failure.
import java.io.FileInputStream;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DeleteAclsResult;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

public class AclAdmin {
    static AclBinding allow(String user, ResourceType type, String name, AclOperation op) {
        return new AclBinding(new ResourcePattern(type, name, PatternType.LITERAL),
                              new AccessControlEntry("User:" + user, "*", op, AclPermissionType.ALLOW));
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[1])) { props.load(in); }
        props.put("bootstrap.servers", args[0]);
        String user = args[3];
        AclBindingFilter usersAcls = new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter("User:" + user, null, AclOperation.ANY, AclPermissionType.ANY));
        try (Admin admin = Admin.create(props)) {
            if (args[2].equals("create")) {
                admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion(
                    user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), args[4]))).all().get();
                System.out.println("created " + user);
                admin.createAcls(List.of(
                    allow(user, ResourceType.TOPIC, args[5], AclOperation.WRITE),
                    allow(user, ResourceType.TOPIC, args[5], AclOperation.READ),
                    allow(user, ResourceType.GROUP, args[6], AclOperation.READ))).all().get();
                Collection<AclBinding> found = admin.describeAcls(usersAcls).values().get();
                for (AclBinding b : found) {
                    System.out.println("acl " + b.pattern().resourceType() + " " + b.pattern().name() + " "
                        + b.pattern().patternType() + " " + b.entry().operation() + " " + b.entry().permissionType());
                }
            } else {
                DeleteAclsResult result = admin.deleteAcls(List.of(usersAcls));
                System.out.println("deleted " + result.all().get().size());
            }
            System.out.println("done");
        } catch (Exception e) {
            System.out.println("error " + e);
            System.exit(1);
        }
    }
}
